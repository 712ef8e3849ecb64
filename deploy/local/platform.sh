# A whole Berth platform of its own, for one measurement: sourced (not run)
# by deploy/local/cpu-per-hold.sh and deploy/local/check-in-morning.sh.
#
# It is shaped like `make up` — three booking services (each with its outbox
# relay and its consumers: cache invalidation, the walk saga, the
# waitlists), three routers, the read model (projection, notifications,
# refunds), a Redis and a NATS JetStream — on ports of its own (PORT_BASE…
# PORT_BASE+45) and a scratch database on the PostgreSQL of `make deps`, so it
# disturbs no stack already running. Everything it started is stopped and the
# scratch database dropped when the sourcing script exits.
#
# Usage, from a script with `set -euo pipefail`:
#
#   NAME=check-in-morning source deploy/local/platform.sh
#   platform_up            # builds, starts, waits until every service is ready
#   "$BIN/loadtest" …      # BERTH_* of the platform are exported
#
# Afterwards: BIN (the binaries, loadtest included), WORK (scratch directory;
# logs in $WORK/logs), DB_URL, ADMIN_URL (the server's admin database),
# PID_OF[name] and REDIS_PID/NATS_PID (for per-process accounting), REDIS_PORT,
# NATS_MONITOR, and the
# BERTH_* exports of .local/env pointing at this platform, BERTH_ADMIN_TOKEN
# and BERTH_OPS_TOKEN included.
#
# Environment (defaults): PORT_BASE (19100), PG_ADMIN_URL (the admin
# database of the server to use; BERTH_TEST_DATABASE_URL), BINARIES (a directory holding
# booking, router and readmodel binaries to run instead of building this
# tree's: before/after comparisons; its loadtest too, when it holds one),
# PROFILE_DIR (unset: no profiling; else
# every service serves net/http/pprof on PORT_BASE+39…, the NATS server on
# PORT_BASE+38, listed in PPROF_OF; the NATS server's monitoring endpoint is
# always on PORT_BASE+37, NATS_MONITOR),
# KEEP_LOGS=1 (keep the scratch directory with the services' logs), KEEP_DB=1
# (keep the scratch database, e.g. to EXPLAIN the statements on its data),
# LAYOUT (together: each region's router runs inside its booking service,
# `booking serve --route`, on the same public port — ADR 0022; the processes
# are then named booking-<region> and there is no router-<region>; split: a
# router process and a booking service process per region, as before ADR
# 0022 — binaries older than it need LAYOUT=split), BERTH_DB_WARM_CONNS (32:
# each booking service opens its whole pool before ready, as deploy/k8s
# configures it; the binary's own default is 8).

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
NAME="${NAME:-platform}"
BASE="${PORT_BASE:-19100}"
LAYOUT="${LAYOUT:-together}"
WARM_CONNS="${BERTH_DB_WARM_CONNS:-32}"
# shellcheck source=service-env.sh
source "$ROOT/deploy/local/service-env.sh" # SERVICE_ENV: the services' and NATS's GODEBUG (not the load generator's)
REGIONS=(us-east eu-west ap-south)

log() { printf '\033[1m[%s]\033[0m %s\n' "$NAME" "$*" >&2; }
die() { log "error: $*"; exit 1; }
port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

[[ -f .local/env ]] || die ".local/env missing: run \`make deps\` first"
set -a
# shellcheck disable=SC1091
source .local/env
set +a
# The booking services sign the development provider's intents with it
# (ADR 0027) and refuse to start without it.
[[ -n "${BERTH_DEV_INTENT_SECRET:-}" ]] || die ".local/env has no BERTH_DEV_INTENT_SECRET: run \`make deps\` again"
# PG_ADMIN_URL: another PostgreSQL server to put the scratch database on
# (e.g. one with pg_stat_statements loaded); default the one of `make deps`.
ADMIN_URL="${PG_ADMIN_URL:-${BERTH_TEST_DATABASE_URL:?BERTH_TEST_DATABASE_URL not set (make deps writes it)}}"
[[ "$LAYOUT" == split || "$LAYOUT" == together ]] || die "LAYOUT=$LAYOUT: want split or together"
command -v psql >/dev/null || die "psql missing (postgresql-client)"
command -v redis-server >/dev/null || die "redis-server missing (make deps installs it)"

for p in $(seq "$BASE" $((BASE + 45))); do
	port_open "$p" && die "port $p is taken: choose another PORT_BASE"
done

WORK="$(mktemp -d "${TMPDIR:-/tmp}/berth-$NAME.XXXXXX")"
BIN="$WORK/bin"
DB="berth_$(tr -c 'a-z0-9\n' _ <<<"$NAME")_$(date +%s)_$$"
# The scratch database's URL: the admin URL with its path replaced.
DB_URL="${ADMIN_URL%%\?*}"
DB_URL="${DB_URL%/*}/$DB"
DB_URL_SEP="?"
[[ "$ADMIN_URL" == *\?* ]] && DB_URL+="?${ADMIN_URL#*\?}" && DB_URL_SEP="&"
PIDS=()
declare -A PID_OF PPROF_OF
platform_down() {
	[[ -n "${PLATFORM_DOWN:-}" ]] && return
	PLATFORM_DOWN=1
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${PIDS[@]}"; do
		for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
		kill -9 "$p" 2>/dev/null || true
	done
	if [[ "${KEEP_DB:-0}" == 1 ]]; then
		log "database kept: $DB_URL (drop it: psql \"$ADMIN_URL\" -c 'DROP DATABASE $DB')"
	else
		psql "$ADMIN_URL" -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true
	fi
	if [[ "${KEEP_LOGS:-0}" == 1 ]]; then log "logs kept in $WORK/logs"; else rm -rf "$WORK"; fi
}
trap platform_down EXIT
trap 'exit 130' INT TERM
mkdir -p "$BIN" "$WORK/logs" "$WORK/nats" "$WORK/mail"

# start name pprof-port command…: the service in the background, its pid kept.
start() {
	local name="$1" pprof="$2"
	shift 2
	local -a env=()
	[[ -n "${PROFILE_DIR:-}" ]] && env=(BERTH_PPROF_ADDR="127.0.0.1:$pprof") && PPROF_OF[$name]=$pprof
	# Each service's database sessions carry its name, so the PostgreSQL
	# backends are accounted per service.
	env "${SERVICE_ENV[@]}" "${env[@]}" BERTH_DATABASE_URL="$DB_URL${DB_URL_SEP}application_name=$name" "$@" >"$WORK/logs/$name.log" 2>&1 </dev/null &
	PIDS+=($!)
	PID_OF[$name]=$!
}

platform_up() {
	log "building the binaries"
	if [[ -n "${BINARIES:-}" ]]; then
		cp "$BINARIES/booking" "$BINARIES/router" "$BINARIES/readmodel" "$BIN/"
	else
		go build -o "$BIN/" ./cmd/booking ./cmd/router ./cmd/readmodel
	fi
	# The help is read whole before it is searched: with pipefail, grep -q
	# quitting at its first match could fail the pipeline (SIGPIPE).
	if [[ "$LAYOUT" == together && "$("$BIN/booking" serve --help 2>/dev/null || true)" != *--route* ]]; then
		# A silent fallback to split would compare two layouts as if they
		# were two builds.
		die "LAYOUT=together: this booking binary has no --route (built before ADR 0022); run it with LAYOUT=split"
	fi
	if [[ -n "${BINARIES:-}" && -x "$BINARIES/loadtest" ]]; then
		cp "$BINARIES/loadtest" "$BIN/" # the same generator on both sides of a comparison
	else
		go build -o "$BIN/loadtest" ./loadtest
	fi
	local nats_bin="$ROOT/.local/bin/nats-server"
	[[ -x "$nats_bin" ]] || nats_bin="$(command -v nats-server || true)"
	if [[ -z "$nats_bin" ]]; then
		log "building nats-server"
		GOBIN="$BIN" GOFLAGS=-mod=mod go install github.com/nats-io/nats-server/v2@v2.15.2
		nats_bin="$BIN/nats-server"
	fi

	local redis_port=$((BASE + 30)) nats_port=$((BASE + 31)) readmodel_port=$((BASE + 20))
	redis-server --port "$redis_port" --bind 127.0.0.1 --save '' --appendonly no --dir "$WORK" \
		>"$WORK/logs/redis.log" 2>&1 </dev/null &
	PIDS+=($!) && REDIS_PID=$! && REDIS_PORT=$redis_port
	local -a nats_prof=()
	if [[ -n "${PROFILE_DIR:-}" ]]; then
		# The broker is profiled too (its own pprof listener), as "nats".
		nats_prof=(--profile $((BASE + 38))) && PPROF_OF[nats]=$((BASE + 38))
	fi
	# The monitoring endpoint (/varz, /jsz) counts messages in and out and
	# each consumer's deliveries: cpu-per-hold.sh reads it per hold.
	NATS_MONITOR="http://127.0.0.1:$((BASE + 37))"
	env "${SERVICE_ENV[@]}" "$nats_bin" -js -a 127.0.0.1 -p "$nats_port" -m $((BASE + 37)) -sd "$WORK/nats" "${nats_prof[@]}" \
		>"$WORK/logs/nats.log" 2>&1 </dev/null &
	PIDS+=($!) && NATS_PID=$!

	psql "$ADMIN_URL" -qc "CREATE DATABASE $DB" >/dev/null
	export BERTH_DATABASE_URL="$DB_URL"
	export BERTH_REDIS_URL="redis://127.0.0.1:$redis_port/0"
	export BERTH_NATS_URL="nats://127.0.0.1:$nats_port"
	export BERTH_READMODEL_URL="http://127.0.0.1:$readmodel_port"
	export BERTH_NOTIFY_DIR="$WORK/mail"
	local -a routers=() bookings=()
	local i r
	for i in "${!REGIONS[@]}"; do
		routers+=("${REGIONS[$i]}=http://127.0.0.1:$((BASE + i))")
		bookings+=("${REGIONS[$i]}=http://127.0.0.1:$((BASE + 10 + i))")
	done
	BERTH_ROUTER_URLS="$(IFS=,; echo "${routers[*]}")"
	BERTH_BOOKING_URLS="$(IFS=,; echo "${bookings[*]}")"
	export BERTH_ROUTER_URLS BERTH_BOOKING_URLS
	"$BIN/booking" migrate >"$WORK/logs/migrate.log" 2>&1 || die "migrations failed: $(tail -5 "$WORK/logs/migrate.log")"

	log "layout: $LAYOUT"
	for i in "${!REGIONS[@]}"; do
		r="${REGIONS[$i]}"
		if [[ "$LAYOUT" == together ]]; then
			# The region's router in the booking service's process: the
			# public port is the router's, the internal one the service's.
			start "booking-$r" $((BASE + 40 + i)) env BERTH_PAYMENT_PROVIDER=dev BERTH_DEV_PAYMENTS=on \
				BERTH_DEV_PAYMENTS_WEBHOOK_URL="http://127.0.0.1:$BASE/v1/payments/webhook" \
				BERTH_DB_WARM_CONNS="$WARM_CONNS" BERTH_ROUTE=true BERTH_ROUTER_ADDR="127.0.0.1:$((BASE + i))" \
				"$BIN/booking" serve --region "$r" --addr "127.0.0.1:$((BASE + 10 + i))"
			continue
		fi
		start "booking-$r" $((BASE + 40 + i)) env BERTH_PAYMENT_PROVIDER=dev BERTH_DEV_PAYMENTS=on \
			BERTH_DEV_PAYMENTS_WEBHOOK_URL="http://127.0.0.1:$BASE/v1/payments/webhook" \
			BERTH_DB_WARM_CONNS="$WARM_CONNS" "$BIN/booking" serve --region "$r" --addr "127.0.0.1:$((BASE + 10 + i))"
		start "router-$r" $((BASE + 43 + i)) "$BIN/router" serve --region "$r" --addr "127.0.0.1:$((BASE + i))"
	done
	start readmodel $((BASE + 39)) "$BIN/readmodel" serve --addr "127.0.0.1:$readmodel_port"

	local port
	for port in $(seq "$BASE" $((BASE + 2))) $(seq $((BASE + 10)) $((BASE + 12))) "$readmodel_port"; do
		for _ in $(seq 300); do
			curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 && break
			sleep 0.1
		done
		curl -fsS "http://127.0.0.1:$port/readyz" >/dev/null 2>&1 || die "port $port not ready; see $WORK/logs (KEEP_LOGS=1 keeps them)"
	done
	BERTH_ADMIN_TOKEN="$("$BIN/booking" token --sub "$NAME-admin" --role admin --ttl 1h)"
	BERTH_OPS_TOKEN="$("$BIN/booking" token --sub "$NAME-ops" --role ops --ttl 1h)"
	export BERTH_ADMIN_TOKEN BERTH_OPS_TOKEN
}
