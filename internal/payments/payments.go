// Package payments holds what Berth shares with its payment provider: the
// webhook signature scheme (Berth-Signature: t=<unix>,v1=<hex HMAC-SHA256>
// over "<t>." + the raw body), payment intents and the one decision about
// money — whether a payment settles what a reservation or appointment costs
// (Due.Check, Payment.Settles: pure, no I/O) — the provider interface
// refunds go through, and the refunds consumer.
package payments

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strconv"
	"strings"
	"time"
)

// Tolerance is how old (or how far in the future) a signature may be.
const Tolerance = 5 * time.Minute

// Sign returns the Berth-Signature header value for body at time t.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

func mac(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte("."))
	m.Write(body)
	return m.Sum(nil)
}

// ErrBadSignature is every reason a signature is refused; the caller
// answers 401 without saying which.
var ErrBadSignature = errors.New("bad or stale signature")

// Verify checks a Berth-Signature header against the raw body: one t, at
// least one v1 (several are allowed during a secret rotation), compared in
// constant time, t within Tolerance of now.
func Verify(secret []byte, header string, body []byte, now time.Time) error {
	if len(secret) == 0 || header == "" || len(header) > 1024 {
		return ErrBadSignature
	}
	var (
		ts   string
		sigs [][]byte
	)
	for _, part := range strings.Split(header, ",") {
		k, v, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return ErrBadSignature
		}
		switch k {
		case "t":
			if ts != "" {
				return ErrBadSignature
			}
			ts = v
		case "v1":
			sig, err := hex.DecodeString(v)
			if err != nil || len(sig) != sha256.Size {
				return ErrBadSignature
			}
			sigs = append(sigs, sig)
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return ErrBadSignature
	}
	if d := now.Sub(time.Unix(sec, 0)); d > Tolerance || d < -Tolerance {
		return ErrBadSignature
	}
	want := mac(secret, ts, body)
	ok := 0
	for _, s := range sigs {
		ok |= boolInt(hmac.Equal(s, want))
	}
	if ok == 0 {
		return ErrBadSignature
	}
	return nil
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
