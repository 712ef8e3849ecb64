package berth

// Response is what a write answers, stored with its Idempotency-Key so that
// a replay returns the very same status and bytes.
type Response struct {
	Status   int
	Body     []byte
	Replayed bool
	// Value is the write's result when it ran without an Idempotency-Key.
	Value any
}

// Idem ties a write to its Idempotency-Key. Render turns the write's outcome
// into the response stored with the key; it runs inside the transaction
// (possibly more than once) and must do no I/O.
type Idem struct {
	Key    string
	Hash   string
	Render func(value any, err error) (status int, body []byte)
	// Webhook puts Key in the payment provider's key space (its event ids),
	// apart from clients' Idempotency-Keys: neither can squat the other.
	Webhook bool
}
