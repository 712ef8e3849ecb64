// Package deptest holds the dependency rules of Berth's packages and the
// test that enforces them, transitively (as tailscale's tstest/deptest
// does): what `go list -deps` says a package pulls in, not only what it
// imports itself. The domain packages speak of reservations, slots and
// placements and need nothing beyond the standard library; the edge
// packages (HTTP, routing, rate limiting, the waiting room, the cache, the
// broker) never reach the database driver, which belongs to postgres alone.
package deptest
