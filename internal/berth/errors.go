// Package berth holds the vocabulary every part of Berth shares: the kinds of
// partition, the principals that act on them, and the short list of error
// kinds the HTTP edge maps to problem+json. It imports only the standard
// library.
package berth

import (
	"errors"
	"fmt"
)

// Code is a machine-readable error kind. The values are the public codes of
// the API contract; the HTTP edge maps each to its status in one place.
type Code string

// The error kinds of the API contract.
const (
	CodeInvalidRequest         Code = "invalid_request"
	CodeIdempotencyKeyRequired Code = "idempotency_key_required"
	CodeUnauthorized           Code = "unauthorized"
	CodeForbidden              Code = "forbidden"
	CodeNotFound               Code = "not_found"
	CodeSoldOut                Code = "sold_out"
	CodeSlotTaken              Code = "slot_taken"
	CodeHoldExpired            Code = "hold_expired"
	CodeInvalidState           Code = "invalid_state"
	CodePaymentRequired        Code = "payment_required"
	// CodeNoRoomFree: check-in found no room of the booked type free (and in
	// order) for every night of the stay — the desk walks the guest.
	CodeNoRoomFree            Code = "no_room_free"
	CodeIdempotencyInProgress Code = "idempotency_in_progress"
	CodeLimitExceeded         Code = "limit_exceeded"
	CodeMisdirected           Code = "misdirected"
	CodeIdempotencyKeyReused  Code = "idempotency_key_reused"
	CodeWaitingRoom           Code = "waiting_room"
	CodeRateLimited           Code = "rate_limited"
	CodeUnavailable           Code = "unavailable"
	// CodeInternal is never sent with details; unknown errors become it.
	CodeInternal Code = "internal"
)

// FieldError names one invalid field of a request.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

// Error is a domain error with a public code. Extra carries the additional
// members of the problem document (nights, alternatives, home_region …).
type Error struct {
	Code   Code
	Detail string
	Fields []FieldError
	Extra  map[string]any
	// RetryAfter, in seconds, is sent as Retry-After when positive.
	RetryAfter int
	// Err is the underlying cause, logged but never shown to clients.
	Err error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Detail, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Detail)
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with the given code and formatted detail.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Detail: fmt.Sprintf(format, args...)}
}

// Invalid returns an invalid_request error listing the bad fields.
func Invalid(fields ...FieldError) *Error {
	detail := "the request is invalid"
	if len(fields) == 1 {
		detail = fields[0].Field + ": " + fields[0].Message
	}
	return &Error{Code: CodeInvalidRequest, Detail: detail, Fields: fields}
}

// ErrorCode returns the code of err, or CodeInternal when err carries none.
func ErrorCode(err error) Code {
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// ErrUnknownOutcome reports that a commit may or may not have happened (the
// connection was lost at COMMIT). It is never reported as success: the client
// retries with the same Idempotency-Key, which makes the retry safe.
var ErrUnknownOutcome = errors.New("transaction outcome unknown")

// ErrDependency marks a failure of something the work depends on — Redis,
// NATS, a payment or message provider — rather than of the work itself. An
// event consumer retries such a failure for as long as it lasts and never
// counts it toward dead-lettering: an outage must not turn good events into
// dead letters. Wrap it with %w next to the cause.
var ErrDependency = errors.New("a dependency is unavailable")
