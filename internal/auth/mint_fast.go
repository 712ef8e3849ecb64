package auth

import (
	"crypto/sha256"
	"encoding/base64"
	"strconv"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/jsonscan"
)

// A load test mints a token for every guest it invents — in a spread-holds
// run, one per hold — and the jwt library's mint (the claims through
// encoding/json and reflection, NumericDate's MarshalJSON, a fresh HMAC
// keyed from the secret each time) was a tenth of the load generator's CPU
// per hold (docs/PERFORMANCE.md, "CPU per hold, by process"). mintFast
// writes the same bytes by hand: the one header (mintedHeader), the claims
// in the order and form encoding/json gives the claims struct (role,
// partitions when there are any, sub when there is one, exp, iat; whole seconds, as the
// library's TimePrecision), signed by a keyed HMAC state from the pool
// verifyFast uses. mintLibrary is the reference it is held to, byte for
// byte, by TestMintWritesWhatTheLibraryWrites and FuzzMint.

// mintFast signs p's claims issued at now for ttl. The caller has checked
// p and ttl (Mint).
func (t *Tokens) mintFast(p berth.Principal, now time.Time, ttl time.Duration) string {
	var buf [256]byte
	claims := buf[:0]
	claims = append(claims, `{"role":`...)
	claims = jsonscan.AppendString(claims, string(p.Role))
	if len(p.Partitions) > 0 {
		claims = append(claims, `,"partitions":[`...)
		for i, part := range p.Partitions {
			if i > 0 {
				claims = append(claims, ',')
			}
			claims = jsonscan.AppendString(claims, part)
		}
		claims = append(claims, ']')
	}
	if p.Subject != "" {
		// The library omits an empty subject (omitempty). Mint refuses one,
		// but the two writers agree on every input all the same (FuzzMint).
		claims = append(claims, `,"sub":`...)
		claims = jsonscan.AppendString(claims, p.Subject)
	}
	// The library truncates both dates to whole seconds (NumericDate).
	claims = append(claims, `,"exp":`...)
	claims = strconv.AppendInt(claims, now.Add(ttl).Truncate(time.Second).Unix(), 10)
	claims = append(claims, `,"iat":`...)
	claims = strconv.AppendInt(claims, now.Truncate(time.Second).Unix(), 10)
	claims = append(claims, '}')

	enc := base64.RawURLEncoding
	n := len(mintedHeader) + 1 + enc.EncodedLen(len(claims))
	tok := make([]byte, n, n+1+enc.EncodedLen(sha256.Size))
	copy(tok, mintedHeader+".")
	enc.Encode(tok[len(mintedHeader)+1:], claims)
	mac := t.macs.get(t.secret)
	mac.Write(tok)
	var sum [sha256.Size]byte
	sig := mac.Sum(sum[:0])
	t.macs.put(mac)
	tok = append(tok, '.')
	tok = enc.AppendEncode(tok, sig)
	return string(tok)
}
