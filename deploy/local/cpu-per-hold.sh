#!/usr/bin/env bash
# CPU per hold across the whole platform, in one command (`make cpu-per-hold`).
#
# Starts a platform of its own, shaped like `make up` — three booking services
# (each with its outbox relay, cache-invalidation and search consumers), three
# routers, the read model (projection, notifications, refunds), a Redis and a
# NATS JetStream — on ports of its own and a scratch database on the
# PostgreSQL of `make deps`, so it disturbs no stack already running. Then:
#
#   1. loadtest baseline --mode http (holds through the routers, spread
#      inventory, closed loop) with --cpu-pids/--cpu-postgres: CPU seconds of
#      every process during the run, per hold;
#   2. loadtest txcost --legs "minimal pgbench" right after: the minimal hold
#      transaction's rate on the same server, and the ratio of the two.
#
# Everything it started is stopped and the scratch database dropped on exit.
#
# Environment (defaults): DURATION (15s), WORKERS (16), HOTELS (20),
# ROOM_TYPES (2), NIGHTS (60), TXCOST_DURATION (5s), PORT_BASE (19100),
# BINARIES (a directory holding booking, router and readmodel binaries to
# measure instead of building this tree's: before/after comparisons),
# TXCOST=0 (skip step 2), PROFILE_DIR (unset: no profiling; else every service serves net/http/pprof
# on PORT_BASE+39… and a CPU profile of PROFILE_SECONDS (10) of each, taken
# during the run, lands there as <service>.pprof), KEEP_LOGS=1 (keep the
# scratch directory with the services' logs).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
DURATION="${DURATION:-15s}"
WORKERS="${WORKERS:-16}"
HOTELS="${HOTELS:-20}"
ROOM_TYPES="${ROOM_TYPES:-2}"
NIGHTS="${NIGHTS:-60}"
TXCOST_DURATION="${TXCOST_DURATION:-5s}"
BASE="${PORT_BASE:-19100}"
REGIONS=(us-east eu-west ap-south)

log() { printf '\033[1m[cpu-per-hold]\033[0m %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

[[ -f .local/env ]] || die ".local/env missing: run \`make deps\` first"
set -a
# shellcheck disable=SC1091
source .local/env
set +a
ADMIN_URL="${BERTH_TEST_DATABASE_URL:?BERTH_TEST_DATABASE_URL not set (make deps writes it)}"
command -v psql >/dev/null || die "psql missing (postgresql-client)"
command -v redis-server >/dev/null || die "redis-server missing (make deps installs it)"

for p in $(seq "$BASE" $((BASE + 45))); do
	port_open "$p" && die "port $p is taken: choose another PORT_BASE"
done

WORK="$(mktemp -d "${TMPDIR:-/tmp}/berth-cpu.XXXXXX")"
BIN="$WORK/bin"
DB="berth_cpu_$(date +%s)_$$"
# The scratch database's URL: the admin URL with its path replaced.
DB_URL="${ADMIN_URL%%\?*}"
DB_URL="${DB_URL%/*}/$DB"
DB_URL_SEP="?"
[[ "$ADMIN_URL" == *\?* ]] && DB_URL+="?${ADMIN_URL#*\?}" && DB_URL_SEP="&"
PIDS=()
cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do
		for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$p" 2>/dev/null || true
	done
	psql "$ADMIN_URL" -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true
	if [[ "${KEEP_LOGS:-0}" == 1 ]]; then log "logs kept in $WORK/logs"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$BIN" "$WORK/logs" "$WORK/nats" "$WORK/mail"

log "building the binaries"
if [[ -n "${BINARIES:-}" ]]; then
	cp "$BINARIES/booking" "$BINARIES/router" "$BINARIES/readmodel" "$BIN/"
else
	go build -o "$BIN/" ./cmd/booking ./cmd/router ./cmd/readmodel
fi
go build -o "$BIN/loadtest" ./loadtest
NATS_BIN="$ROOT/.local/bin/nats-server"
[[ -x "$NATS_BIN" ]] || NATS_BIN="$(command -v nats-server || true)"
if [[ -z "$NATS_BIN" ]]; then
	log "building nats-server"
	GOBIN="$BIN" GOFLAGS=-mod=mod go install github.com/nats-io/nats-server/v2@v2.15.2
	NATS_BIN="$BIN/nats-server"
fi

REDIS_PORT=$((BASE + 30)) NATS_PORT=$((BASE + 31)) READMODEL_PORT=$((BASE + 20))
redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK" \
	>"$WORK/logs/redis.log" 2>&1 </dev/null &
PIDS+=($!) && REDIS_PID=$!
"$NATS_BIN" -js -a 127.0.0.1 -p "$NATS_PORT" -sd "$WORK/nats" >"$WORK/logs/nats.log" 2>&1 </dev/null &
PIDS+=($!) && NATS_PID=$!

psql "$ADMIN_URL" -qc "CREATE DATABASE $DB" >/dev/null
export BERTH_DATABASE_URL="$DB_URL"
export BERTH_REDIS_URL="redis://127.0.0.1:$REDIS_PORT/0"
export BERTH_NATS_URL="nats://127.0.0.1:$NATS_PORT"
export BERTH_READMODEL_URL="http://127.0.0.1:$READMODEL_PORT"
export BERTH_NOTIFY_DIR="$WORK/mail"
routers=() bookings=()
for i in "${!REGIONS[@]}"; do
	routers+=("${REGIONS[$i]}=http://127.0.0.1:$((BASE + i))")
	bookings+=("${REGIONS[$i]}=http://127.0.0.1:$((BASE + 10 + i))")
done
BERTH_ROUTER_URLS="$(IFS=,; echo "${routers[*]}")"
BERTH_BOOKING_URLS="$(IFS=,; echo "${bookings[*]}")"
export BERTH_ROUTER_URLS BERTH_BOOKING_URLS
"$BIN/booking" migrate >"$WORK/logs/migrate.log" 2>&1 || die "migrations failed: $(tail -5 "$WORK/logs/migrate.log")"

# start name pprof-port command…: the service in the background, its pid kept.
declare -A PID_OF
start() {
	local name="$1" pprof="$2"
	shift 2
	local -a env=()
	[[ -n "${PROFILE_DIR:-}" ]] && env=(BERTH_PPROF_ADDR="127.0.0.1:$pprof") && PPROF_OF[$name]=$pprof
	# Each service's database sessions carry its name, so the PostgreSQL
	# backends are accounted per service.
	env "${env[@]}" BERTH_DATABASE_URL="$DB_URL${DB_URL_SEP}application_name=$name" "$@" >"$WORK/logs/$name.log" 2>&1 </dev/null &
	PIDS+=($!)
	PID_OF[$name]=$!
}
declare -A PPROF_OF
for i in "${!REGIONS[@]}"; do
	r="${REGIONS[$i]}"
	start "booking-$r" $((BASE + 40 + i)) env BERTH_PAYMENT_PROVIDER=dev BERTH_DEV_PAYMENTS=on \
		BERTH_DEV_PAYMENTS_WEBHOOK_URL="http://127.0.0.1:$BASE/v1/payments/webhook" \
		"$BIN/booking" serve --region "$r" --addr "127.0.0.1:$((BASE + 10 + i))"
	start "router-$r" $((BASE + 43 + i)) "$BIN/router" serve --region "$r" --addr "127.0.0.1:$((BASE + i))"
done
start readmodel $((BASE + 39)) "$BIN/readmodel" serve --addr "127.0.0.1:$READMODEL_PORT"

for port in $(seq "$BASE" $((BASE + 2))) $(seq $((BASE + 10)) $((BASE + 12))) "$READMODEL_PORT"; do
	for _ in $(seq 300); do
		curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
		sleep 0.1
	done
	curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 || die "port $port not ready; see $WORK/logs (KEEP_LOGS=1 keeps them)"
done
BERTH_ADMIN_TOKEN="$("$BIN/booking" token --sub cpu-admin --role admin --ttl 1h)"
BERTH_OPS_TOKEN="$("$BIN/booking" token --sub cpu-ops --role ops --ttl 1h)"
export BERTH_ADMIN_TOKEN BERTH_OPS_TOKEN

cpu_pids="redis=$REDIS_PID,nats=$NATS_PID"
for name in "${!PID_OF[@]}"; do cpu_pids+=",$name=${PID_OF[$name]}"; done
log "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
OUT="$WORK/baseline.txt"
"$BIN/loadtest" baseline --mode http --duration "$DURATION" --workers "$WORKERS" --hotels "$HOTELS" \
	--room-types "$ROOM_TYPES" --nights "$NIGHTS" --cpu-pids "$cpu_pids" --cpu-postgres --quiet \
	--name "cpu-per-hold-$(date +%Y%m%d-%H%M%S)" 2>&1 | tee "$OUT" &
run=$!
profiles=()
if [[ -n "${PROFILE_DIR:-}" ]]; then
	# Profiles start with the holds (after the seeding) and end before them.
	mkdir -p "$PROFILE_DIR"
	until grep -q 'hold_http …' "$OUT" 2>/dev/null; do sleep 0.2; kill -0 "$run" 2>/dev/null || break; done
	for name in "${!PPROF_OF[@]}"; do
		curl -fsS -o "$PROFILE_DIR/$name.pprof" \
			"http://127.0.0.1:${PPROF_OF[$name]}/debug/pprof/profile?seconds=${PROFILE_SECONDS:-10}" &
		profiles+=($!)
	done
fi
wait "$run" "${profiles[@]}"
[[ -n "${PROFILE_DIR:-}" ]] && log "profiles in $PROFILE_DIR (go tool pprof -top $PROFILE_DIR/booking-us-east.pprof)"
holds="$(awk '$1 == "hold_http" { print $3; exit }' "$OUT")"
TX="$WORK/txcost.txt"
touch "$TX"
[[ "${TXCOST:-1}" == 0 ]] || "$BIN/loadtest" txcost --db "$ADMIN_URL" --legs "minimal pgbench" --duration "$TXCOST_DURATION" --workers "$WORKERS" | tee "$TX"
minimal="$(awk '$1 == "minimal" && $2 == "pgbench" && $3 == "spread" { print $4; exit }' "$TX")"
log "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
if [[ -n "$holds" && -n "$minimal" ]]; then
	awk -v h="$holds" -v m="$minimal" 'BEGIN { printf "\nholds through the routers %.0f/s ÷ minimal transaction (pgbench, spread) %.0f/s = %.3f\n", h, m, h / m }'
fi
awk '$1 == "total" { printf "CPU per hold, all processes: %s ms\n", $3 }' "$OUT"
