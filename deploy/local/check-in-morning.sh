#!/usr/bin/env bash
# A check-in morning through the whole platform, in one command
# (`make check-in-morning`).
#
# Starts a platform of its own (deploy/local/platform.sh: three regions'
# booking services with their relays and walk-saga consumers, routers, read
# model, Redis, NATS; its own ports and a scratch database), then:
#
#   1. loadtest check-in-morning through the routers: a hotel sold
#      OVERBOOKING_PCT over its standard rooms checks ARRIVALS guests in; the
#      desks walk the rest (upgrade to a suite, else relocation to a sister
#      hotel — the saga through the outbox and NATS, run by the services'
#      own consumers). Its audit is postgres.Verify on the scratch database;
#   2. `booking verify` on the same database afterwards (the CLI's audit: the
#      exit status fails the run).
#
# The report lands in .local/loadtest/; the load average before and after
# is printed (the machine may be shared: compare ratios within one run).
#
# Environment (defaults): ARRIVALS (200), OVERBOOKING_PCT (10), RATE (0:
# closed loop, WORKERS desks), WORKERS (16), SETTLE_WAIT (2m), PORT_BASE
# (19200), and platform.sh's BINARIES, PROFILE_DIR, KEEP_LOGS, LAYOUT.
set -euo pipefail

ARRIVALS="${ARRIVALS:-200}"
OVERBOOKING_PCT="${OVERBOOKING_PCT:-10}"
RATE="${RATE:-0}"
WORKERS="${WORKERS:-16}"
SETTLE_WAIT="${SETTLE_WAIT:-2m}"
PORT_BASE="${PORT_BASE:-19200}"
NAME=check-in-morning
# shellcheck source=platform.sh
source "$(dirname "${BASH_SOURCE[0]}")/platform.sh"
platform_up

log "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$BIN/loadtest" check-in-morning --arrivals "$ARRIVALS" --overbooking-pct "$OVERBOOKING_PCT" \
	--rate "$RATE" --workers "$WORKERS" --settle-wait "$SETTLE_WAIT" --quiet \
	--name "check-in-morning-$ARRIVALS-$(date +%Y%m%d-%H%M%S)" || status=$?
log "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
log "booking verify on the platform's database"
"$BIN/booking" verify || status=$?
exit "${status:-0}"
