# The environment the local stack gives the Go processes it starts — the
# services and NATS; not the tests, not the load generator. Sourced by
# stack.sh and platform.sh.
#
# SERVICE_GODEBUG (BERTH_SERVICE_GODEBUG; empty for Go's defaults) is added to
# GODEBUG. schedtrace at its largest value (2^31-1 ms, 24.8 days) is there for
# its side effect: Go's sysmon thread never enters its deep sleep, so the next
# system call of a process that was idle for a moment does not wake it into
# polling every 20 µs again; it settles at one wake-up per 10 ms instead
# (golang/go#18236). On the 2-core guests these figures come from, where
# every nanosleep is a context switch, that polling was 4.5 % of the machine
# in the booking services alone (docs/PERFORMANCE.md, "Go's sysmon kept
# awake"). The trace prints a line only every 24.8 days of the machine's
# monotonic clock: on a machine up longer than that, one line at start.
#
# SERVICE_ENV holds the assignments, for `env "${SERVICE_ENV[@]}" command…`.
SERVICE_GODEBUG="${BERTH_SERVICE_GODEBUG-schedtrace=2147483647}"
SERVICE_ENV=()
[[ -z "$SERVICE_GODEBUG" ]] || SERVICE_ENV=(GODEBUG="${GODEBUG:+$GODEBUG,}$SERVICE_GODEBUG")
