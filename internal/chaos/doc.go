// Package chaos is Berth's fault-injection suite. Its tests build the real
// binaries, run them as subprocesses on a private PostgreSQL 15 cluster, an
// in-process NATS JetStream server and a private redis-server — each behind
// an in-process Toxiproxy — drive hotel and clinic traffic through the
// router (patients racing for few slots, prepaid ones paying through the
// development provider), probe the router's rate limiter and a clinic's
// waiting room (edges_test.go), walk guests arriving at overbooked hotels
// (upgrades, and relocation sagas to a sister hotel homed in the other
// region; walks_test.go), and inject faults one after another:
// latency, resets and timeouts on every dependency, kill -9 of a booking
// service (once between the relay's publish and its mark-sent, once while
// relocation sagas have a step pending there), a PostgreSQL crash-restart,
// a NATS restart and a Redis flush.
//
// Every client outcome is recorded as ok, rejected (an expected 409),
// failed (a definite 4xx) or unknown (timeout, connection error, 5xx);
// unknown outcomes are retried with the same Idempotency-Key until they
// resolve. Afterwards the suite proves, from the database: postgres.Verify
// is clean, every ok booking exists exactly once, every refused one does not
// exist, no event is lost or duplicated in the stream, the read model
// converges, and a hold succeeded within 30 s of every fault healing; the
// same for appointments, plus: a paid appointment is confirmed and a
// made-up payment confirms nothing; the rate limit holds wherever Redis
// decides and fails open while it cannot; the waiting room never admits
// faster than its rate, keeps arrivals in order, answers every request, and
// its access tokens admit only their own guest; and every arriving guest
// ends with exactly one live stay — walked with one stay at the sister,
// or confirmed again after an undo — each step's event written once.
//
// `go test ./internal/chaos/` runs the short version (a few seconds per
// fault); `make chaos` (BERTH_CHAOS_LONG=1 or -tags chaos) the long one.
// Reports land in .local/chaos/; docs/RELIABILITY.md quotes them.
package chaos
