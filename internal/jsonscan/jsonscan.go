// Package jsonscan reads the plainest JSON values in place, for the few hot
// shapes read by hand (a hold's body, the claims of the tokens Berth mints):
// a caller that meets anything these do not accept hands the whole input to
// encoding/json or the library that owns the format. AppendString writes
// the one value the hot shapes written by hand share (the tokens Berth
// mints, an answer's spliced members, a hold's fingerprint; the domain
// package reservation keeps a copy, as it uses the standard library only).
package jsonscan

import "encoding/json"

// AppendString appends s as encoding/json encodes a string: quoted, with its
// HTML-safe escapes. Plain printable ASCII — every id the platform and the
// load test make — is copied as is; anything else goes through
// encoding/json itself, so the two can never disagree.
func AppendString(dst []byte, s string) []byte {
	if !Plain(s) {
		quoted, _ := json.Marshal(s) // a string always encodes
		return append(dst, quoted...)
	}
	dst = append(dst, '"')
	dst = append(dst, s...)
	return append(dst, '"')
}

// Plain says whether encoding/json writes s as is between quotes:
// printable ASCII with nothing to escape.
func Plain(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c > 0x7e || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			return false
		}
	}
	return true
}

// String reads the JSON string at b[i:] when it is printable ASCII without
// escapes; next is the index after it. Anything else is not ok.
func String(b string, i int) (s string, next int, ok bool) {
	if i >= len(b) || b[i] != '"' {
		return "", i, false
	}
	for j := i + 1; j < len(b); j++ {
		switch c := b[j]; {
		case c == '"':
			return b[i+1 : j], j + 1, true
		case c < 0x20 || c > 0x7e || c == '\\':
			return "", j, false
		}
	}
	return "", len(b), false
}

// Int reads a non-negative JSON integer of 1 to digits digits (at most 18)
// at b[i:], without a leading zero; next is the index after it.
func Int(b string, i, digits int) (n int64, next int, ok bool) {
	j := i
	for j < len(b) && b[j] >= '0' && b[j] <= '9' {
		if j-i < 18 {
			n = n*10 + int64(b[j]-'0')
		}
		j++
	}
	if j == i || j-i > min(digits, 18) || (b[i] == '0' && j-i > 1) {
		return 0, j, false
	}
	return n, j, true
}
