package payments

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"strings"
	"sync"
)

// MaxRefLen is the longest payment_ref a confirmation accepts, and so the
// longest intent id a provider of Berth's may hand out.
const MaxRefLen = 128

// MinDevIntentSecretLen is the shortest key the development provider's
// intents are signed with (BERTH_DEV_INTENT_SECRET).
const MinDevIntentSecretLen = 32

// DevIntentPrefix starts every intent id of the development provider.
const DevIntentPrefix = "pi_dev_"

// DevIntents mints and opens the development provider's payment intents as
// self-describing, authenticated tokens (ADR 0027): the id carries what the
// intent pays for — kind, partition, reservation, amount, currency — and a
// digest of its idempotency key, under an HMAC with a key only the
// deployment's booking services share; the client secret is a second HMAC
// of the id. Creating an intent is then a computation, not a database
// write: the provider stores an intent only once something happens to it
// (it is paid or fails). A forged or altered id does not open, and nobody
// without the key can derive an id's client secret, so nothing but the
// provider's own intents can ever be paid or reported as succeeded.
//
// The same request (idempotency key and parameters) always gives the same
// id and secret, which is what makes a replayed hold get the same intent.
type DevIntents struct {
	ids, secrets *keyedMAC
}

// keyedMAC hands out HMAC states keyed once: a prepaid hold computes two
// MACs, and keying a new state costs as much as the MAC of an id.
type keyedMAC struct{ pool sync.Pool }

func newKeyedMAC(key []byte) *keyedMAC {
	k := &keyedMAC{}
	k.pool.New = func() any { return hmac.New(sha256.New, key) }
	return k
}

// sum appends the first macLen bytes of b's MAC to dst.
func (k *keyedMAC) sum(dst, b []byte) []byte {
	h := k.pool.Get().(hash.Hash)
	defer k.pool.Put(h)
	h.Reset()
	h.Write(b)
	var out [sha256.Size]byte
	return append(dst, h.Sum(out[:0])[:macLen]...)
}

// NewDevIntents derives the two keys (ids, client secrets) from secret.
// A secret shorter than MinDevIntentSecretLen is refused: the keys would be
// guessable, and a guessable key pays any intent.
func NewDevIntents(secret string) (*DevIntents, error) {
	if len(secret) < MinDevIntentSecretLen {
		return nil, fmt.Errorf("want at least %d bytes, the same for every booking service of the deployment", MinDevIntentSecretLen)
	}
	derive := func(purpose string) []byte {
		m := hmac.New(sha256.New, []byte(secret))
		m.Write([]byte(purpose))
		return m.Sum(nil)
	}
	return &DevIntents{ids: newKeyedMAC(derive("berth dev payment intent id v1")),
		secrets: newKeyedMAC(derive("berth dev payment intent client secret v1"))}, nil
}

// DevIntent is what an authentic id says.
type DevIntent struct {
	Kind, PartitionID, ReservationID string
	AmountCents                      int64
	Currency                         string
	// KeyDigest names the idempotency key the intent was made under (a
	// digest of it: the key itself does not fit in an id). The provider
	// stores it with a paid intent, so a key pays one intent only.
	KeyDigest string
}

// Intent is the intent as the provider reports it before anything happened
// to it: waiting for payment, without its client secret.
func (d DevIntent) Intent(id string) Intent {
	return Intent{ID: id, Kind: d.Kind, PartitionID: d.PartitionID, ReservationID: d.ReservationID,
		AmountCents: d.AmountCents, Currency: d.Currency, Status: IntentPending}
}

const (
	devIntentVersion = 1
	macLen           = 16 // bytes of HMAC-SHA256 kept: 128 bits
	keyDigestLen     = 16
)

// ErrDevIntentTooLong is an intent whose id would be longer than MaxRefLen
// (ids of partitions or reservations far longer than Berth's UUIDs).
var ErrDevIntentTooLong = errors.New("intent id would be longer than a payment_ref may be")

// Mint returns the intent of req with its client secret. It refuses what
// no provider accepts (no amount, no key) and an id that would not fit in a
// payment_ref.
func (d *DevIntents) Mint(req IntentRequest) (Intent, error) {
	if req.AmountCents <= 0 || req.IdempotencyKey == "" {
		return Intent{}, fmt.Errorf("create intent: want a positive amount and an idempotency key")
	}
	digest := sha256.Sum256([]byte(req.IdempotencyKey))
	b := make([]byte, 1, 96)
	b[0] = devIntentVersion
	b = appendKind(b, req.Kind)
	b = appendID(b, req.PartitionID)
	b = appendID(b, req.ReservationID)
	b = binary.AppendUvarint(b, uint64(req.AmountCents))
	b = appendString(b, req.Currency)
	b = append(b, digest[:keyDigestLen]...)
	b = d.ids.sum(b, b)
	id := DevIntentPrefix + base64.RawURLEncoding.EncodeToString(b)
	if len(id) > MaxRefLen {
		return Intent{}, fmt.Errorf("create intent: %w (%d > %d)", ErrDevIntentTooLong, len(id), MaxRefLen)
	}
	in := Intent{ID: id, ClientSecret: d.Secret(id), Kind: req.Kind, PartitionID: req.PartitionID,
		ReservationID: req.ReservationID, AmountCents: req.AmountCents, Currency: req.Currency, Status: IntentPending}
	return in, nil
}

// Open reads an id the provider minted. ok is false for anything else: not
// an id of this provider, made under another key, or altered in any byte.
func (d *DevIntents) Open(id string) (in DevIntent, ok bool) {
	rest, found := strings.CutPrefix(id, DevIntentPrefix)
	if !found || len(id) > MaxRefLen {
		return in, false
	}
	b, err := base64.RawURLEncoding.Strict().DecodeString(rest)
	if err != nil || len(b) < 1+keyDigestLen+macLen {
		return in, false
	}
	body, sum := b[:len(b)-macLen], b[len(b)-macLen:]
	// The MAC is checked before a byte of the body is trusted.
	var want [macLen]byte
	if !hmac.Equal(sum, d.ids.sum(want[:0], body)) {
		return in, false
	}
	return parseDevIntent(body)
}

// Secret is the client secret of id: whoever holds it may pay the intent.
func (d *DevIntents) Secret(id string) string {
	var mac [macLen]byte
	return id + "_secret_" + base64.RawURLEncoding.EncodeToString(d.secrets.sum(mac[:0], []byte(id)))
}

// SecretMatches reports, in constant time, whether secret is id's.
func (d *DevIntents) SecretMatches(id, secret string) bool {
	return hmac.Equal([]byte(secret), []byte(d.Secret(id)))
}

// The body: version, kind, partition, reservation, amount, currency, key
// digest. Kinds Berth has take one byte and canonical UUIDs 17, so an id of
// Berth's intents stays well within MaxRefLen; anything else is written out
// with its length.
const (
	tagString = 0
	tagUUID   = 1
	tagHotel  = 2
	tagClinic = 3
)

func appendKind(b []byte, kind string) []byte {
	switch kind {
	case "hotel":
		return append(b, tagHotel)
	case "clinic":
		return append(b, tagClinic)
	}
	return appendString(b, kind)
}

func appendID(b []byte, id string) []byte {
	if u, ok := parseUUID(id); ok {
		return append(append(b, tagUUID), u[:]...)
	}
	return appendString(b, id)
}

func appendString(b []byte, s string) []byte {
	b = append(b, tagString)
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// parseUUID accepts only the canonical lower-case form, the one read back,
// so that every id decodes to exactly the string it was made from.
func parseUUID(s string) (u [16]byte, ok bool) {
	if len(s) != 36 || s[8] != '-' || s[13] != '-' || s[18] != '-' || s[23] != '-' {
		return u, false
	}
	h := s[0:8] + s[9:13] + s[14:18] + s[19:23] + s[24:]
	if strings.ToLower(h) != h {
		return u, false
	}
	if _, err := hex.Decode(u[:], []byte(h)); err != nil {
		return u, false
	}
	return u, true
}

func formatUUID(u []byte) string {
	h := hex.EncodeToString(u)
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// devIntentReader reads a body field by field; the first malformed field
// makes every later read fail.
type devIntentReader struct {
	b   []byte
	bad bool
}

func (r *devIntentReader) uvarint() uint64 {
	if r.bad {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.bad = true
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *devIntentReader) bytes(n uint64) []byte {
	if r.bad || n > uint64(len(r.b)) {
		r.bad = true
		return nil
	}
	v := r.b[:n]
	r.b = r.b[n:]
	return v
}

func (r *devIntentReader) field(allowKind bool) string {
	tag := r.bytes(1)
	if r.bad {
		return ""
	}
	switch {
	case tag[0] == tagString:
		return string(r.bytes(r.uvarint()))
	case tag[0] == tagUUID && !allowKind:
		if u := r.bytes(16); !r.bad {
			return formatUUID(u)
		}
	case tag[0] == tagHotel && allowKind:
		return "hotel"
	case tag[0] == tagClinic && allowKind:
		return "clinic"
	default:
		r.bad = true
	}
	return ""
}

func parseDevIntent(body []byte) (in DevIntent, ok bool) {
	r := &devIntentReader{b: body}
	if v := r.bytes(1); r.bad || v[0] != devIntentVersion {
		return in, false
	}
	in.Kind = r.field(true)
	in.PartitionID = r.field(false)
	in.ReservationID = r.field(false)
	amount := r.uvarint()
	in.Currency = r.field(false)
	digest := r.bytes(keyDigestLen)
	if r.bad || len(r.b) != 0 || amount == 0 || amount > 1<<63-1 {
		return DevIntent{}, false
	}
	in.AmountCents = int64(amount)
	in.KeyDigest = "sha256:" + base64.RawURLEncoding.EncodeToString(digest)
	return in, true
}
