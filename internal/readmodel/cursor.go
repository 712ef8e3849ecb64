package readmodel

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"strings"

	"github.com/berthhq/berth/internal/view"
)

// Cursors are opaque to clients: base64url(JSON position) "." base64url(MAC).
// The MAC binds the position to the guest and the filters, so a cursor
// tampered with, or reused for another guest or filter, is rejected.
type cursorCodec struct{ key []byte }

type cursorBody struct {
	view.Position
	Scope string `json:"g"` // guest + filters the cursor belongs to
}

var errBadCursor = errors.New("the cursor is invalid")

func (c cursorCodec) mac(payload []byte) []byte {
	m := hmac.New(sha256.New, c.key)
	m.Write([]byte("berth-readmodel-cursor\x00"))
	m.Write(payload)
	return m.Sum(nil)[:16]
}

func (c cursorCodec) encode(scope string, p view.Position) string {
	payload, _ := json.Marshal(cursorBody{Position: p, Scope: scope})
	enc := base64.RawURLEncoding
	return enc.EncodeToString(payload) + "." + enc.EncodeToString(c.mac(payload))
}

func (c cursorCodec) decode(scope, s string) (view.Position, error) {
	if len(s) > 1024 {
		return view.Position{}, errBadCursor
	}
	p64, m64, ok := strings.Cut(s, ".")
	if !ok {
		return view.Position{}, errBadCursor
	}
	enc := base64.RawURLEncoding
	payload, err1 := enc.DecodeString(p64)
	sum, err2 := enc.DecodeString(m64)
	if err1 != nil || err2 != nil || !hmac.Equal(sum, c.mac(payload)) {
		return view.Position{}, errBadCursor
	}
	var b cursorBody
	if err := json.Unmarshal(payload, &b); err != nil || b.Scope != scope || b.ID == "" {
		return view.Position{}, errBadCursor
	}
	return b.Position, nil
}
