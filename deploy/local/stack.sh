#!/usr/bin/env bash
# The local Berth stack: PostgreSQL 15, Redis and NATS JetStream from local
# binaries under .local/, then the Berth services of three regions.
#
#   stack.sh deps     start PostgreSQL, Redis, NATS and stripe-mock (what the tests need)
#   stack.sh up       deps + migrations + the services of every region, in the background
#                     (WAN=1: with the simulated WAN between the regions, deploy/local/wan)
#   stack.sh run      up + demo seed, then follow the logs; Ctrl-C stops everything
#   stack.sh down     stop everything this script started
#   stack.sh status   show what runs
#
# Idempotent: a second `up` reuses whatever already runs. Everything it makes
# lives in .local/ (git-ignored); .local/env holds shell exports of the URLs
# and development credentials.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
LOCAL="$ROOT/.local"
BIN="$LOCAL/bin"
LOGS="$LOCAL/logs"
RUN="$LOCAL/run"
PG_PORT="${BERTH_PG_PORT:-55432}"
REDIS_PORT="${BERTH_REDIS_PORT:-56379}"
# glibc's malloc settings of the PostgreSQL server (see start_postgres); empty
# for glibc's defaults. One tunable only: this glibc (2.36) passes on just the
# first of a colon-separated list to the processes it starts, and pg_ctl
# starts the server through a shell.
PG_MALLOC_TUNABLES="${BERTH_PG_MALLOC_TUNABLES-glibc.malloc.trim_threshold=8388608}"
# shellcheck source=service-env.sh
source "$ROOT/deploy/local/service-env.sh" # SERVICE_ENV: the services' and NATS's GODEBUG
NATS_PORT="${BERTH_NATS_PORT:-54222}"
NATS_HTTP_PORT="${BERTH_NATS_HTTP_PORT:-58222}"
NATS_VERSION="v2.15.2"
# stripe-mock is Stripe's own test server: the Stripe adapter's tests run
# against it (internal/stripepay). Built with go install like nats-server.
STRIPE_MOCK_PORT="${BERTH_STRIPE_MOCK_PORT:-52111}"
STRIPE_MOCK_HTTPS_PORT="${BERTH_STRIPE_MOCK_HTTPS_PORT:-52112}"
STRIPE_MOCK_VERSION="v0.203.0"
REGIONS=(us-east eu-west ap-south)
# Public (router) ports per region; booking services listen on internal ports.
ROUTER_PORTS=(8080 8081 8082)
BOOKING_PORTS=(9080 9081 9082)
READMODEL_PORT=8090
# WAN=1: routers reach the other regions' services through Toxiproxy
# (deploy/local/wan) with real inter-region round-trip times.
WAN="${WAN:-0}"
WAN_API_PORT=8474
# LAYOUT=together (the default): each region's router runs inside its
# booking service (`booking serve --route`, ADR 0022), on the public port;
# split: a router process per region in front of the booking service.
LAYOUT="${LAYOUT:-together}"

log() { printf '\033[1m[stack]\033[0m %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

port_open() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

wait_port() { # port name [seconds]
	local i
	for ((i = 0; i < ${3:-60} * 10; i++)); do
		port_open "$1" && return 0
		sleep 0.1
	done
	die "$2 did not listen on port $1; see $LOGS"
}

# has_command binary subcommand: whether the built binary has that subcommand.
has_command() { [[ -x "$BIN/$1" ]] && "$BIN/$1" --help 2>/dev/null | grep -qE "^  $2 "; }

pid_alive() { [[ -f "$1" ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

apt_install() {
	log "installing $* with apt-get"
	if [[ $(id -u) -ne 0 ]]; then die "$* missing and not root; install: apt-get install $*"; fi
	if [[ -z "$(find /var/lib/apt/lists -name '*Packages*' -print -quit 2>/dev/null)" ]]; then
		apt-get update -qq >/dev/null
	fi
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null || {
		apt-get update -qq >/dev/null
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
	}
}

pg_bindir() {
	local d
	for d in /usr/lib/postgresql/15/bin; do
		[[ -x "$d/postgres" ]] && { echo "$d"; return; }
	done
	return 1
}

# Run a command as the unprivileged database owner when we are root
# (PostgreSQL refuses to run as root).
as_pg() {
	if [[ $(id -u) -eq 0 ]]; then runuser -u postgres -- "$@"; else "$@"; fi
}

start_postgres() {
	local bindir
	bindir="$(pg_bindir)" || { apt_install postgresql-15; bindir="$(pg_bindir)"; }
	local data="$LOCAL/pg/data" sock="$LOCAL/pg/sock"
	if port_open "$PG_PORT"; then
		log "postgresql already on :$PG_PORT"
		local pid
		pid="$(head -1 "$data/postmaster.pid" 2>/dev/null || true)"
		if [[ -n "$PG_MALLOC_TUNABLES" && -n "$pid" && -r "/proc/$pid/environ" ]] && ! tr '\0' '\n' <"/proc/$pid/environ" | grep -q '^GLIBC_TUNABLES=.*malloc.trim_threshold'; then
			log "note: it runs with glibc's default malloc trimming, not PG_MALLOC_TUNABLES; \`make down\` and start it again to apply them"
		fi
		return
	fi
	mkdir -p "$LOCAL/pg" "$sock"
	if [[ $(id -u) -eq 0 ]]; then
		id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
		chown -R postgres "$LOCAL/pg"
		# The data directory must be reachable by the postgres user.
		chmod o+x "$ROOT" "$LOCAL" 2>/dev/null || true
		local p="$ROOT"
		while [[ "$p" != "/" ]]; do chmod o+x "$p" 2>/dev/null || true; p="$(dirname "$p")"; done
	fi
	if [[ ! -f "$data/PG_VERSION" ]]; then
		log "initdb into .local/pg/data"
		as_pg "$bindir/initdb" -D "$data" -U berth --auth=trust -E UTF8 --locale=C.UTF-8 >"$LOGS/initdb.log" 2>&1 ||
			as_pg "$bindir/initdb" -D "$data" -U berth --auth=trust -E UTF8 --locale=C >"$LOGS/initdb.log" 2>&1
		cat >>"$data/postgresql.conf" <<CONF
# Berth local development settings.
listen_addresses = '127.0.0.1'
port = $PG_PORT
unix_socket_directories = '$sock'
max_connections = 400
shared_buffers = 256MB
# fsync off survives process crashes (kill -9, restarts) but not an OS crash:
# fine for a laptop stack; synchronous_commit stays on so a commit is durable
# against the process crashes the fault tests inject.
fsync = off
full_page_writes = off
max_locks_per_transaction = 256
# Statement counts and times (\`STATEMENTS=1 make cpu-per-hold\`): loaded at
# start, so a data directory made before this line has it only once the line
# is added to its postgresql.conf and the server restarted.
shared_preload_libraries = 'pg_stat_statements'
CONF
	fi
	log "starting postgresql on :$PG_PORT"
	# glibc gives the top of a backend's heap back to the kernel whenever more
	# than 128 KB of it is free (M_TRIM_THRESHOLD), and every statement of the
	# hold can free that much: each B-tree scan pallocs about 27 KB outside its
	# context's blocks, so a statement with a handful of scans ends with brk()
	# shrinking the heap and the next one faulting the pages back in, with a
	# TLB shoot-down of the other core each time — about 30 % of the booking
	# services' backend CPU per hold (docs/PERFORMANCE.md, "PostgreSQL's heap
	# kept between statements"). Keeping up to 8 MB of free heap per backend
	# stops that. (A fixed threshold also fixes glibc's mmap threshold at
	# 128 KB; no statement of the hold allocates that much at once.)
	as_pg env ${PG_MALLOC_TUNABLES:+GLIBC_TUNABLES="$PG_MALLOC_TUNABLES"} "$bindir/pg_ctl" -D "$data" -l "$LOCAL/pg/postgres.log" -w -t 60 start >/dev/null
	wait_port "$PG_PORT" postgresql
	local psql="$bindir/psql"
	"$psql" -h 127.0.0.1 -p "$PG_PORT" -U berth -d postgres -qtAc "SELECT 1 FROM pg_database WHERE datname='berth'" | grep -q 1 ||
		"$psql" -h 127.0.0.1 -p "$PG_PORT" -U berth -d postgres -qc "CREATE DATABASE berth" >/dev/null
}

start_redis() {
	if port_open "$REDIS_PORT"; then log "redis already on :$REDIS_PORT"; return; fi
	command -v redis-server >/dev/null || apt_install redis-server
	mkdir -p "$LOCAL/redis"
	log "starting redis on :$REDIS_PORT"
	redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --daemonize yes --dir "$LOCAL/redis" \
		--pidfile "$RUN/redis.pid" --logfile "$LOGS/redis.log" --save '' --appendonly no >/dev/null
	wait_port "$REDIS_PORT" redis
}

start_nats() {
	if port_open "$NATS_PORT"; then log "nats already on :$NATS_PORT"; return; fi
	if [[ ! -x "$BIN/nats-server" ]] || ! "$BIN/nats-server" --version 2>/dev/null | grep -q "${NATS_VERSION#v}"; then
		log "building nats-server $NATS_VERSION into .local/bin"
		(cd "$ROOT" && GOBIN="$BIN" GOFLAGS=-mod=mod go install "github.com/nats-io/nats-server/v2@$NATS_VERSION")
	fi
	mkdir -p "$LOCAL/nats"
	log "starting nats (JetStream) on :$NATS_PORT"
	env "${SERVICE_ENV[@]}" "$BIN/nats-server" -js -a 127.0.0.1 -p "$NATS_PORT" -m "$NATS_HTTP_PORT" -sd "$LOCAL/nats" \
		-P "$RUN/nats.pid" >"$LOGS/nats.log" 2>&1 </dev/null &
	wait_port "$NATS_PORT" nats
}

start_stripe_mock() {
	if port_open "$STRIPE_MOCK_PORT"; then log "stripe-mock already on :$STRIPE_MOCK_PORT"; return; fi
	# stripe-mock reports no version of its own: a stamp file says which one was built.
	if [[ ! -x "$BIN/stripe-mock" ]] || [[ "$(cat "$BIN/stripe-mock.version" 2>/dev/null)" != "$STRIPE_MOCK_VERSION" ]]; then
		log "building stripe-mock $STRIPE_MOCK_VERSION into .local/bin"
		(cd "$ROOT" && GOBIN="$BIN" GOFLAGS=-mod=mod go install "github.com/stripe/stripe-mock@$STRIPE_MOCK_VERSION")
		echo "$STRIPE_MOCK_VERSION" >"$BIN/stripe-mock.version"
	fi
	log "starting stripe-mock on :$STRIPE_MOCK_PORT"
	# Both listeners on loopback and on our ports (its HTTPS default is every
	# interface on 12112).
	"$BIN/stripe-mock" -http-addr "127.0.0.1:$STRIPE_MOCK_PORT" -https-addr "127.0.0.1:$STRIPE_MOCK_HTTPS_PORT" \
		>"$LOGS/stripe-mock.log" 2>&1 </dev/null &
	echo $! >"$RUN/stripe-mock.pid"
	wait_port "$STRIPE_MOCK_PORT" stripe-mock
}

write_env() {
	local f="$LOCAL/env"
	[[ -f "$LOCAL/secrets" ]] || {
		umask 077
		{
			echo "BERTH_TOKEN_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
			echo "BERTH_WEBHOOK_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
			echo "BERTH_WAITING_ROOM_KEYS=k1:$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')"
		} >"$LOCAL/secrets"
	}
	# Added to secrets made before it existed: the development payment
	# provider's intents are signed with it (ADR 0027), and every booking
	# service of the stack must share it.
	grep -q '^BERTH_DEV_INTENT_SECRET=' "$LOCAL/secrets" ||
		echo "BERTH_DEV_INTENT_SECRET=$(head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \n')" >>"$LOCAL/secrets"
	# shellcheck disable=SC1091
	source "$LOCAL/secrets"
	local routers=() bookings=() i
	for i in "${!REGIONS[@]}"; do
		routers+=("${REGIONS[$i]}=http://127.0.0.1:${ROUTER_PORTS[$i]}")
		bookings+=("${REGIONS[$i]}=http://127.0.0.1:${BOOKING_PORTS[$i]}")
	done
	{
		echo "# Written by deploy/local/stack.sh — development values only."
		echo "export BERTH_DATABASE_URL='postgres://berth@127.0.0.1:$PG_PORT/berth?sslmode=disable'"
		echo "export BERTH_TEST_DATABASE_URL='postgres://berth@127.0.0.1:$PG_PORT/postgres?sslmode=disable'"
		echo "export BERTH_REDIS_URL='redis://127.0.0.1:$REDIS_PORT/0'"
		echo "export BERTH_NATS_URL='nats://127.0.0.1:$NATS_PORT'"
		echo "export BERTH_ROUTER_URLS='$(IFS=,; echo "${routers[*]}")'"
		echo "export BERTH_BOOKING_URLS='$(IFS=,; echo "${bookings[*]}")'"
		echo "export BERTH_READMODEL_URL='http://127.0.0.1:$READMODEL_PORT'"
		echo "export BERTH_TOKEN_SECRET='$BERTH_TOKEN_SECRET'"
		echo "export BERTH_TOKEN_MAX_TTL='24h'"
		echo "export BERTH_WEBHOOK_SECRET='$BERTH_WEBHOOK_SECRET'"
		echo "export BERTH_DEV_INTENT_SECRET='$BERTH_DEV_INTENT_SECRET'"
		echo "export BERTH_WAITING_ROOM_KEYS='$BERTH_WAITING_ROOM_KEYS'"
		echo "export BERTH_STRIPE_MOCK_URL='http://127.0.0.1:$STRIPE_MOCK_PORT'"
	} >"$f.tmp"
	mv "$f.tmp" "$f"
	# shellcheck disable=SC1090
	source "$f"
	if [[ -x "$BIN/booking" ]]; then
		# Development tokens live within BERTH_TOKEN_MAX_TTL like any other
		# (the services refuse longer ones); `make up` mints fresh ones.
		{
			echo "export BERTH_ADMIN_TOKEN='$("$BIN/booking" token --sub dev-admin --role admin --ttl 24h)'"
			echo "export BERTH_OPS_TOKEN='$("$BIN/booking" token --sub dev-ops --role ops --ttl 24h)'"
			echo "export BERTH_GUEST_TOKEN='$("$BIN/booking" token --sub guest-demo --role guest --ttl 24h)'"
		} >>"$f"
		if has_command readmodel partners; then
			# One development partner, created once and kept in .local/partner-key.
			local key=""
			[[ -s "$LOCAL/partner-key" ]] && key="$(cat "$LOCAL/partner-key")"
			if [[ -z "$key" ]]; then
				key="$("$BIN/readmodel" partners create --name dev-partner --quiet 2>/dev/null || true)"
				if [[ -n "$key" ]]; then (umask 077 && echo "$key" >"$LOCAL/partner-key"); fi
			fi
			if [[ -n "$key" ]]; then echo "export BERTH_PARTNER_API_KEY='$key'" >>"$f"; fi
		fi
	fi
}

build() {
	log "building berth binaries into .local/bin"
	(cd "$ROOT" && go build -o "$BIN/" ./cmd/booking ./cmd/router ./cmd/readmodel ./deploy/local/wan)
}

start_service() { # name port args...
	local name="$1" port="$2"
	shift 2
	if port_open "$port"; then log "$name already on :$port"; return; fi
	log "starting $name on :$port"
	# shellcheck disable=SC1091
	# The subshell execs the service, so the pid written is the service's;
	# its output goes to the log, never to the caller's terminal or pipe.
	(
		set +u
		source "$LOCAL/env"
		exec env "${SERVICE_ENV[@]}" "$@"
	) >>"$LOGS/$name.log" 2>&1 </dev/null &
	echo $! >"$RUN/$name.pid"
}

start_services() {
	build
	write_env
	# shellcheck disable=SC1091
	source "$LOCAL/env"
	"$BIN/booking" migrate >>"$LOGS/migrate.log" 2>&1 || die "migrations failed; see .local/logs/migrate.log"
	local i has_router=0
	if has_command router serve; then has_router=1; fi
	[[ $LAYOUT == split || $LAYOUT == together ]] || die "LAYOUT=$LAYOUT: want split or together"
	if [[ -f "$RUN/layout" && "$(cat "$RUN/layout")" != "$LAYOUT" ]] && port_open "${ROUTER_PORTS[0]}"; then
		die "the platform runs with LAYOUT=$(cat "$RUN/layout"); \`make down\` first to change it"
	fi
	echo "$LAYOUT" >"$RUN/layout"
	# A stack started before the router existed runs us-east's booking
	# service on the public port: stop it so the router can take the port
	# (it comes back on its internal port below).
	if [[ $has_router -eq 1 ]] && pid_alive "$RUN/booking-us-east.pid" &&
		ps -o args= -p "$(cat "$RUN/booking-us-east.pid")" | grep -q -- "--addr 127.0.0.1:${ROUTER_PORTS[0]}"; then
		stop_pidfile booking-us-east "$RUN/booking-us-east.pid"
	fi
	# The WAN sits between routers and the other regions: a router already
	# running with (or without) it would silently keep the other shape.
	local router_up=0
	port_open "${ROUTER_PORTS[0]}" && router_up=1
	if [[ $WAN == 1 && $router_up -eq 1 ]] && ! pid_alive "$RUN/wan.pid"; then
		die "the routers already run without the WAN; \`make down\` (if you started them), then \`make up WAN=1\`"
	fi
	if [[ $WAN != 1 && $router_up -eq 1 ]] && pid_alive "$RUN/wan.pid"; then
		log "note: the routers run with the simulated WAN (started with WAN=1); \`make down\` first to run without it"
	fi
	local -a router_env
	if [[ $WAN == 1 && $has_router -eq 1 ]]; then
		start_service wan "$WAN_API_PORT" "$BIN/wan" serve --api "127.0.0.1:$WAN_API_PORT"
		wait_port "$WAN_API_PORT" wan 30
	fi
	for i in "${!REGIONS[@]}"; do
		local r="${REGIONS[$i]}" bport="${BOOKING_PORTS[$i]}"
		router_env=()
		if [[ $WAN == 1 ]]; then
			local wan_env
			wan_env="$("$BIN/wan" env --region "$r")" || die "wan env --region $r failed"
			mapfile -t router_env <<<"$wan_env"
		fi
		# Until a router fronts it, us-east's booking service takes the public port.
		[[ $has_router -eq 0 && $i -eq 0 ]] && bport="${ROUTER_PORTS[0]}"
		# The development payment provider with its pay endpoint on; its
		# signed webhooks go through the us-east router to the home region.
		if [[ $LAYOUT == together && $has_router -eq 1 ]]; then
			start_service "booking-$r" "$bport" env "${router_env[@]}" BERTH_ROUTE=true BERTH_ROUTER_ADDR="127.0.0.1:${ROUTER_PORTS[$i]}" \
				BERTH_PAYMENT_PROVIDER=dev BERTH_DEV_PAYMENTS=on \
				BERTH_DEV_PAYMENTS_WEBHOOK_URL="http://127.0.0.1:${ROUTER_PORTS[0]}/v1/payments/webhook" \
				"$BIN/booking" serve --region "$r" --addr "127.0.0.1:$bport"
			continue
		fi
		start_service "booking-$r" "$bport" env BERTH_PAYMENT_PROVIDER=dev BERTH_DEV_PAYMENTS=on \
			BERTH_DEV_PAYMENTS_WEBHOOK_URL="http://127.0.0.1:${ROUTER_PORTS[0]}/v1/payments/webhook" \
			"$BIN/booking" serve --region "$r" --addr "127.0.0.1:$bport"
		if [[ $has_router -eq 1 ]]; then
			start_service "router-$r" "${ROUTER_PORTS[$i]}" env "${router_env[@]}" "$BIN/router" serve --region "$r" --addr "127.0.0.1:${ROUTER_PORTS[$i]}"
		fi
	done
	if has_command readmodel serve; then
		start_service readmodel "$READMODEL_PORT" "$BIN/readmodel" serve --addr "127.0.0.1:$READMODEL_PORT"
	fi
	for i in "${!REGIONS[@]}"; do
		local bport="${BOOKING_PORTS[$i]}"
		[[ $has_router -eq 0 && $i -eq 0 ]] && bport="${ROUTER_PORTS[0]}"
		wait_port "$bport" "booking-${REGIONS[$i]}" 30
		if [[ $has_router -eq 1 ]]; then wait_port "${ROUTER_PORTS[$i]}" "router of ${REGIONS[$i]} ($LAYOUT)" 30; fi
	done
	write_env # now with tokens and the partner key
}

stop_pidfile() { # name pidfile
	if pid_alive "$2"; then
		log "stopping $1"
		kill "$(cat "$2")" 2>/dev/null || true
		local i
		for ((i = 0; i < 100; i++)); do pid_alive "$2" || break; sleep 0.1; done
		pid_alive "$2" && kill -9 "$(cat "$2")" 2>/dev/null || true
	fi
	rm -f "$2"
}

down() {
	local f
	for f in "$RUN"/router-*.pid "$RUN"/wan.pid "$RUN"/booking-*.pid "$RUN"/readmodel.pid; do
		[[ -e "$f" ]] || continue
		stop_pidfile "$(basename "$f" .pid)" "$f"
	done
	stop_pidfile nats "$RUN/nats.pid"
	stop_pidfile stripe-mock "$RUN/stripe-mock.pid"
	if [[ -f "$RUN/redis.pid" ]]; then stop_pidfile redis "$RUN/redis.pid"; fi
	if [[ -f "$LOCAL/pg/data/postmaster.pid" ]]; then
		log "stopping postgresql"
		as_pg "$(pg_bindir)/pg_ctl" -D "$LOCAL/pg/data" -m fast -w stop >/dev/null 2>&1 || true
	fi
}

status() {
	local name port
	for name in postgres:$PG_PORT redis:$REDIS_PORT nats:$NATS_PORT stripe-mock:$STRIPE_MOCK_PORT; do
		port="${name#*:}"
		if port_open "$port"; then echo "up    ${name%%:*} :$port"; else echo "down  ${name%%:*} :$port"; fi
	done
	for f in "$RUN"/*.pid; do
		[[ -e "$f" ]] || continue
		if pid_alive "$f"; then echo "up    $(basename "$f" .pid) pid $(cat "$f")"; else echo "dead  $(basename "$f" .pid)"; fi
	done
}

deps() {
	mkdir -p "$BIN" "$LOGS" "$RUN"
	start_postgres
	start_redis
	start_nats
	start_stripe_mock
	write_env
}

case "${1:-}" in
deps) deps ;;
up)
	deps
	start_services
	log "up; source .local/env for URLs and tokens"
	;;
run)
	deps
	start_services
	trap 'echo; down; exit 0' INT TERM
	"$BIN/booking" seed-demo --print-examples || log "demo seed failed; see above"
	log "following logs; Ctrl-C stops everything"
	tail -n 0 -F "$LOGS"/booking-*.log "$LOGS"/router-*.log "$LOGS"/readmodel.log 2>/dev/null &
	wait
	;;
down) down ;;
status) status ;;
*)
	echo "usage: $0 deps|up|run|down|status" >&2
	exit 2
	;;
esac
