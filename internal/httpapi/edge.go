package httpapi

import (
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/berthhq/berth/internal/berth"
)

// The one check of hostile bytes (docs/SECURITY.md, boundary 1). No field
// of the contract — an id, a name, a date, a key, an e-mail address — can
// hold a control character (C0, DEL, C1: NUL among them) or a byte sequence
// that is not UTF-8. Such bytes are refused before any handler or store
// sees them, so they can never reach the database, where PostgreSQL rejects
// a NUL in TEXT with an error that would otherwise surface as a 500 (or, in
// the read model, as a 503 blaming an outage on the client).
//
// Two places apply it, and nothing else needs to: CheckRequest for what
// arrives before the body (path, query, headers), run by every server's
// ServeHTTP; and DecodeBytes for the strings of a JSON body.

// CleanText reports whether s is valid UTF-8 without control characters.
func CleanText(s string) bool {
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == 0x7f {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			return false
		}
		if unicode.IsControl(r) {
			return false
		}
		i += size
	}
	return true
}

// cleanHeaderValue is CleanText that also allows the horizontal tab, which
// RFC 9110 permits inside field values.
func cleanHeaderValue(s string) bool {
	if strings.IndexByte(s, '\t') < 0 {
		return CleanText(s)
	}
	return CleanText(strings.ReplaceAll(s, "\t", " "))
}

// CheckRequest refuses a request whose path, query or headers carry
// control characters or invalid UTF-8, or whose query does not parse:
// invalid_request naming where, never echoing the bytes themselves.
func CheckRequest(r *http.Request) error {
	if !CleanText(r.URL.Path) {
		return berth.Invalid(berth.FieldError{Field: "path", Message: "contains control characters or invalid UTF-8"})
	}
	if r.URL.RawQuery != "" {
		q, err := url.ParseQuery(r.URL.RawQuery)
		if err != nil {
			return berth.Invalid(berth.FieldError{Field: "query", Message: "malformed query string"})
		}
		for k, vs := range q {
			if !CleanText(k) {
				return berth.Invalid(berth.FieldError{Field: "query", Message: "a parameter name contains control characters or invalid UTF-8"})
			}
			for _, v := range vs {
				if !CleanText(v) {
					return berth.Invalid(berth.FieldError{Field: k, Message: "contains control characters or invalid UTF-8"})
				}
			}
		}
	}
	for name, vs := range r.Header {
		if !CleanText(name) {
			return berth.Invalid(berth.FieldError{Field: "header", Message: "a header name contains control characters or invalid UTF-8"})
		}
		for _, v := range vs {
			if !cleanHeaderValue(v) {
				return berth.Invalid(berth.FieldError{Field: name, Message: "contains control characters or invalid UTF-8"})
			}
		}
	}
	return nil
}

// checkStrings walks a decoded request body and returns the first string —
// value or map key, at any depth — that CleanText refuses, named by its
// JSON path (data.partition_id, weekly[2].start).
func checkStrings(v reflect.Value, path string) *berth.FieldError {
	bad := func(p string) *berth.FieldError {
		if p == "" {
			p = "body"
		}
		return &berth.FieldError{Field: p, Message: "contains control characters or invalid UTF-8"}
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil
		}
		return checkStrings(v.Elem(), path)
	case reflect.String:
		if !CleanText(v.String()) {
			return bad(path)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			f := t.Field(i)
			if !f.IsExported() {
				continue
			}
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "-" {
				continue
			}
			if name == "" {
				name = f.Name
			}
			if f.Anonymous && f.Tag.Get("json") == "" {
				name = "" // embedded: its fields are the parent's
			}
			if fe := checkStrings(v.Field(i), join(path, name)); fe != nil {
				return fe
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.Type().Elem().Kind() == reflect.Uint8 {
			return nil // []byte is base64 in JSON: no text to check
		}
		for i := range v.Len() {
			if fe := checkStrings(v.Index(i), path+"["+strconv.Itoa(i)+"]"); fe != nil {
				return fe
			}
		}
	case reflect.Map:
		iter := v.MapRange()
		for iter.Next() {
			k := iter.Key()
			if k.Kind() == reflect.String && !CleanText(k.String()) {
				return bad(path)
			}
			name := path
			if k.Kind() == reflect.String {
				name = join(path, k.String())
			}
			if fe := checkStrings(iter.Value(), name); fe != nil {
				return fe
			}
		}
	}
	return nil
}

func join(path, name string) string {
	switch {
	case path == "":
		return name
	case name == "":
		return path
	}
	return path + "." + name
}
