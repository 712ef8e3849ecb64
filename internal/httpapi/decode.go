package httpapi

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"strings"
	"unicode/utf8"

	"github.com/berthhq/berth/internal/berth"
	"github.com/google/uuid"
)

// MaxBodyBytes bounds every request body; larger ones are refused.
const MaxBodyBytes = 64 << 10

// Decode reads a JSON object body into dst strictly: one object, no unknown
// fields, no trailing data, at most MaxBodyBytes. Errors are invalid_request
// naming the field where one can be named.
func Decode(w http.ResponseWriter, r *http.Request, dst any) error {
	body, err := readJSONBody(w, r)
	if err != nil {
		return err
	}
	return DecodeBytes(body, dst)
}

// readJSONBody is Decode's checks of the Content-Type and the size, and the
// body they let through.
func readJSONBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || (mt != "application/json" && !strings.HasSuffix(mt, "+json")) {
			return nil, berth.Invalid(berth.FieldError{Field: "Content-Type", Message: "want application/json"})
		}
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		var tooBig *http.MaxBytesError
		if errors.As(err, &tooBig) {
			return nil, berth.Invalid(berth.FieldError{Field: "body", Message: fmt.Sprintf("larger than %d bytes", MaxBodyBytes)})
		}
		return nil, berth.Invalid(berth.FieldError{Field: "body", Message: "could not be read"})
	}
	return body, nil
}

// DecodeBytes is Decode on a body already read. JSON is UTF-8 (RFC 8259):
// encoding/json would quietly turn invalid bytes into U+FFFD, so they are
// refused first; after decoding, every string of dst passes the edge's
// check of hostile bytes (edge.go), whatever field it lands in.
func DecodeBytes(body []byte, dst any) error {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return berth.Invalid(berth.FieldError{Field: "body", Message: "want a JSON object"})
	}
	if !utf8.Valid(trimmed) {
		return berth.Invalid(berth.FieldError{Field: "body", Message: "not valid UTF-8"})
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(dst); err != nil {
		return decodeError(err)
	}
	if dec.More() {
		return berth.Invalid(berth.FieldError{Field: "body", Message: "unexpected data after the JSON object"})
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return berth.Invalid(berth.FieldError{Field: "body", Message: "unexpected data after the JSON object"})
	}
	if fe := checkStrings(reflect.ValueOf(dst), ""); fe != nil {
		return berth.Invalid(*fe)
	}
	return nil
}

func decodeError(err error) error {
	var (
		typeErr   *json.UnmarshalTypeError
		syntaxErr *json.SyntaxError
	)
	switch {
	case errors.As(err, &typeErr):
		field := typeErr.Field
		if field == "" {
			field = "body"
		}
		return berth.Invalid(berth.FieldError{Field: field, Message: "want " + jsonKind(typeErr.Type.Kind().String())})
	case errors.As(err, &syntaxErr), errors.Is(err, io.ErrUnexpectedEOF):
		return berth.Invalid(berth.FieldError{Field: "body", Message: "malformed JSON"})
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		name := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return berth.Invalid(berth.FieldError{Field: name, Message: "unknown field"})
	}
	return berth.Invalid(berth.FieldError{Field: "body", Message: "malformed JSON"})
}

func jsonKind(goKind string) string {
	switch goKind {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64":
		return "an integer"
	case "float32", "float64":
		return "a number"
	case "string":
		return "a string"
	case "bool":
		return "a boolean"
	case "slice", "array":
		return "an array"
	}
	return "an object"
}

// Fields collects field errors of one request.
type Fields []berth.FieldError

// Add records a field error.
func (f *Fields) Add(field, msg string) {
	*f = append(*f, berth.FieldError{Field: field, Message: msg})
}

// Err returns an invalid_request error when any field failed.
func (f Fields) Err() error {
	if len(f) == 0 {
		return nil
	}
	return berth.Invalid(f...)
}

// ValidID reports whether s is a canonical UUID (our ids are UUIDs; anything
// else cannot name a partition or row).
func ValidID(s string) bool {
	if len(s) != 36 {
		return false
	}
	_, err := uuid.Parse(s)
	return err == nil
}

// PathID returns the path value name if it is a valid id, else not_found.
func PathID(r *http.Request, name, what string) (string, error) {
	v := r.PathValue(name)
	if !ValidID(v) {
		return "", berth.Errorf(berth.CodeNotFound, "%s %q not found", what, truncate(v, 64))
	}
	return strings.ToLower(v), nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBodyBytes))
	if err != nil {
		return nil, berth.Invalid(berth.FieldError{Field: "body", Message: fmt.Sprintf("larger than %d bytes or unreadable", MaxBodyBytes)})
	}
	return body, nil
}

// PartitionPath splits /v1/{hotels|clinics}/{id}/{rest}: the partition a
// request is about, as the router (which home region), the rate limiter
// (whose budget) and the waiting room (which clinic) all read it. The id is
// lower-cased (ids are UUIDs); kind is "" when the path names no partition.
func PartitionPath(path string) (kind berth.Kind, id, rest string) {
	var tail string
	switch {
	case strings.HasPrefix(path, "/v1/hotels/"):
		kind, tail = berth.KindHotel, path[len("/v1/hotels/"):]
	case strings.HasPrefix(path, "/v1/clinics/"):
		kind, tail = berth.KindClinic, path[len("/v1/clinics/"):]
	default:
		return "", "", ""
	}
	id, rest, _ = strings.Cut(tail, "/")
	if id == "" {
		return "", "", ""
	}
	return kind, strings.ToLower(id), rest
}
