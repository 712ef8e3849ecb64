// Package httpapi is the booking service's HTTP edge: routing, strict
// request decoding, authentication, idempotency plumbing, and the one place
// where domain errors become RFC 9457 problem+json answers.
package httpapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"unicode/utf8"

	"github.com/berthhq/berth/internal/berth"
)

// statusOf maps each public error code to its HTTP status (API.md).
var statusOf = map[berth.Code]int{
	berth.CodeInvalidRequest:         http.StatusBadRequest,
	berth.CodeIdempotencyKeyRequired: http.StatusBadRequest,
	berth.CodeUnauthorized:           http.StatusUnauthorized,
	berth.CodeForbidden:              http.StatusForbidden,
	berth.CodeNotFound:               http.StatusNotFound,
	berth.CodeSoldOut:                http.StatusConflict,
	berth.CodeSlotTaken:              http.StatusConflict,
	berth.CodeHoldExpired:            http.StatusConflict,
	berth.CodeInvalidState:           http.StatusConflict,
	berth.CodePaymentRequired:        http.StatusPaymentRequired,
	berth.CodeNoRoomFree:             http.StatusConflict,
	berth.CodeIdempotencyInProgress:  http.StatusConflict,
	berth.CodeLimitExceeded:          http.StatusConflict,
	berth.CodeMisdirected:            http.StatusMisdirectedRequest,
	berth.CodeIdempotencyKeyReused:   http.StatusUnprocessableEntity,
	berth.CodeWaitingRoom:            http.StatusPreconditionRequired,
	berth.CodeRateLimited:            http.StatusTooManyRequests,
	berth.CodeUnavailable:            http.StatusServiceUnavailable,
}

// StatusOf returns the HTTP status of a code (500 for unknown codes).
func StatusOf(c berth.Code) int {
	if s, ok := statusOf[c]; ok {
		return s
	}
	return http.StatusInternalServerError
}

// ProblemContentType is the media type of every error body.
const ProblemContentType = "application/problem+json"

// Problem renders err as a problem document and its status. Unknown errors
// become a generic 500 whose details stay in the logs.
func Problem(err error) (int, []byte) {
	var be *berth.Error
	if !errors.As(err, &be) {
		be = &berth.Error{Code: berth.CodeInternal, Detail: "an internal error occurred"}
	}
	status := StatusOf(be.Code)
	doc := map[string]any{}
	for k, v := range be.Extra {
		doc[k] = v
	}
	doc["type"] = "https://berth.dev/problems/" + string(be.Code)
	doc["title"] = titleOf(be.Code)
	doc["status"] = status
	doc["detail"] = clip(be.Detail, maxDetailRunes)
	doc["code"] = be.Code
	if n := len(be.Fields); n > 0 {
		shown := be.Fields[:min(n, MaxFieldErrors)]
		list := make([]berth.FieldError, len(shown))
		for i, fe := range shown {
			list[i] = berth.FieldError{Field: clip(fe.Field, maxFieldRunes), Message: clip(fe.Message, maxFieldRunes)}
		}
		doc["errors"] = list
		if n > MaxFieldErrors {
			doc["errors_omitted"] = n - MaxFieldErrors
			doc["detail"] = fmt.Sprintf("%s (the first %d errors are listed; %d more were omitted)", doc["detail"], MaxFieldErrors, n-MaxFieldErrors)
		}
	}
	body, mErr := json.Marshal(doc)
	if mErr != nil {
		body = []byte(`{"type":"https://berth.dev/problems/internal","title":"Internal error","status":500,"code":"internal"}`)
		status = http.StatusInternalServerError
	}
	return status, body
}

// The size of an answer is bounded whatever the request held (finding 7 of
// issue 13: thousands of bad query parameters once made a 269 KB answer).
const (
	// MaxFieldErrors is the most entries errors[] lists; errors_omitted
	// counts the rest.
	MaxFieldErrors = 20
	// maxFieldRunes bounds a field name or message of errors[] (a field
	// name may be a client's query parameter name).
	maxFieldRunes = 100
	// maxDetailRunes bounds detail.
	maxDetailRunes = 300
)

// clip shortens s to at most n runes, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i, runes := 0, 0
	for i < len(s) && runes < n {
		_, size := utf8.DecodeRuneInString(s[i:])
		i += size
		runes++
	}
	if i >= len(s) {
		return s
	}
	return s[:i] + "…"
}

func titleOf(c berth.Code) string {
	if c == berth.CodeInternal {
		return "Internal error"
	}
	return http.StatusText(StatusOf(c))
}

// WriteProblem writes err as problem+json, logging unknown errors.
func WriteProblem(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	status, body := Problem(err)
	var be *berth.Error
	if errors.As(err, &be) && be.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(be.RetryAfter))
	}
	if status >= 500 && log != nil {
		log.ErrorContext(r.Context(), "request failed", "method", r.Method, "path", r.URL.Path, "status", status, "err", err)
	}
	w.Header().Set("Content-Type", ProblemContentType)
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// WriteJSON writes v as a JSON body with the given status.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		status, body = Problem(err)
		w.Header().Set("Content-Type", ProblemContentType)
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// writeRaw writes stored response bytes; bodies of 4xx/5xx are problems.
func writeRaw(w http.ResponseWriter, status int, body []byte) {
	if status >= 400 {
		w.Header().Set("Content-Type", ProblemContentType)
	} else {
		w.Header().Set("Content-Type", "application/json")
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
