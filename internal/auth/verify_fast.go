package auth

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"strings"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/jsonscan"
)

// Every request to a protected route verifies its token, and in a sale
// every hold is a guest, so a token, of its own: a cache of verified tokens
// would not help. The jwt library's parse (a map for the header, the claims
// decoded twice through encoding/json to refuse non-numeric dates) was about
// a fifth of the booking service's own CPU on a hold's request path
// (docs/PERFORMANCE.md, "CPU per hold, by process"). verifyFast reads the
// tokens Mint issues — the one HS256 header, compact claims of this
// package's names, plain strings and integer dates — by hand, and the
// signature is checked on every token all the same.
//
// verifyFast only ever accepts: a token it cannot read, or one that fails
// any check, goes to the library (verifySlow), which decides and names the
// reason. So no token verifyFast accepts can be one the library refuses —
// FuzzVerifyFast holds them to that — and no refusal depends on this code.

// mintedHeader is the header segment of every token Mint issues:
// base64url({"alg":"HS256","typ":"JWT"}).
const mintedHeader = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9"

// macs holds keyed HMAC-SHA256 states of the secret (Reset returns one to
// the keyed state), so a verification allocates none.
type macs struct{ pool chan hash.Hash }

func (m *macs) get(secret []byte) hash.Hash {
	select {
	case h := <-m.pool:
		h.Reset()
		return h
	default:
		return hmac.New(sha256.New, secret)
	}
}

func (m *macs) put(h hash.Hash) {
	select {
	case m.pool <- h:
	default:
	}
}

// verifyFast verifies a token Mint could have issued; ok is false when the
// library must decide.
func (t *Tokens) verifyFast(token string) (p berth.Principal, ok bool) {
	signed, sig64, found := cutLast(token, '.')
	if !found || !strings.HasPrefix(signed, mintedHeader+".") || len(sig64) != 43 {
		return p, false
	}
	payload64 := signed[len(mintedHeader)+1:]
	var sig [32]byte
	if n, err := base64.RawURLEncoding.Strict().Decode(sig[:], []byte(sig64)); err != nil || n != len(sig) {
		return p, false
	}
	mac := t.macs.get(t.secret)
	mac.Write([]byte(signed))
	var sum [sha256.Size]byte
	good := hmac.Equal(mac.Sum(sum[:0]), sig[:])
	t.macs.put(mac)
	if !good {
		return p, false
	}
	var buf [512]byte
	payload := buf[:0]
	if n := base64.RawURLEncoding.DecodedLen(len(payload64)); n > len(buf) {
		payload = make([]byte, n)
	} else {
		payload = buf[:n]
	}
	n, err := base64.RawURLEncoding.Strict().Decode(payload, []byte(payload64))
	if err != nil {
		return p, false
	}
	c, ok := readClaims(payload[:n])
	if !ok {
		return p, false
	}
	// The library's checks (exp required, exp, nbf and iat against now with
	// the leeway), then Verify's own.
	now := t.now()
	if !c.hasExp || !now.Before(time.Unix(c.exp, 0).Add(Leeway)) {
		return p, false
	}
	if c.hasNbf && now.Before(time.Unix(c.nbf, 0).Add(-Leeway)) {
		return p, false
	}
	from := now
	if c.hasIat {
		if now.Before(time.Unix(c.iat, 0).Add(-Leeway)) {
			return p, false
		}
		from = time.Unix(c.iat, 0)
	}
	if time.Unix(c.exp, 0).Sub(from) > t.maxLifetime || c.sub == "" || !c.role.Valid() {
		return p, false
	}
	return berth.Principal{Subject: c.sub, Role: c.role, Partitions: c.partitions}, true
}

func cutLast(s string, sep byte) (before, after string, found bool) {
	if i := strings.LastIndexByte(s, sep); i >= 0 {
		return s[:i], s[i+1:], true
	}
	return s, "", false
}

// fastClaims are the claims verifyFast reads.
type fastClaims struct {
	sub                    string
	role                   berth.Role
	partitions             []string
	exp, iat, nbf          int64
	hasExp, hasIat, hasNbf bool
}

// readClaims reads a compact JSON object of the claims Mint writes (sub,
// role, partitions, exp, iat) and nbf: strings of printable ASCII without
// escapes, dates as integers of at most 12 digits (the library reads them
// through a float64, exact below 2^53). Anything else — another claim, a
// name given twice, a space, an escape, null, a fraction — is not ok.
func readClaims(payload []byte) (c fastClaims, ok bool) {
	b := string(payload) // one string: the claims are slices of it
	if len(b) < 2 || b[0] != '{' || b[len(b)-1] != '}' {
		return c, false
	}
	var seen [6]bool
	i := 1
	if b[i] == '}' {
		return c, i == len(b)-1
	}
	for {
		name, next, ok := jsonscan.String(b, i)
		if !ok || next >= len(b) || b[next] != ':' {
			return c, false
		}
		i = next + 1
		slot := -1
		switch name {
		case "sub":
			slot = 0
			c.sub, i, ok = jsonscan.String(b, i)
		case "role":
			slot = 1
			var role string
			role, i, ok = jsonscan.String(b, i)
			c.role = berth.Role(role)
		case "exp":
			slot = 2
			c.exp, i, ok = jsonscan.Int(b, i, 12)
			c.hasExp = true
		case "iat":
			slot = 3
			c.iat, i, ok = jsonscan.Int(b, i, 12)
			c.hasIat = true
		case "nbf":
			slot = 4
			c.nbf, i, ok = jsonscan.Int(b, i, 12)
			c.hasNbf = true
		case "partitions":
			slot = 5
			c.partitions, i, ok = plainStrings(b, i)
		}
		if slot < 0 || !ok || seen[slot] || i >= len(b) {
			return c, false
		}
		seen[slot] = true
		switch {
		case b[i] == ',':
			i++
		case b[i] == '}' && i == len(b)-1:
			return c, true
		default:
			return c, false
		}
	}
}

// plainStrings reads a JSON array of plain strings at b[i:]; [] is an empty
// slice, as encoding/json gives.
func plainStrings(b string, i int) (out []string, next int, ok bool) {
	if i >= len(b) || b[i] != '[' {
		return nil, i, false
	}
	i++
	out = []string{}
	if i < len(b) && b[i] == ']' {
		return out, i + 1, true
	}
	for {
		var s string
		if s, i, ok = jsonscan.String(b, i); !ok || i >= len(b) {
			return nil, i, false
		}
		out = append(out, s)
		switch b[i] {
		case ',':
			i++
		case ']':
			return out, i + 1, true
		default:
			return nil, i, false
		}
	}
}
