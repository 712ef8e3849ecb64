#!/usr/bin/env bash
# Loadtest scenarios through the whole platform, with what each request cost
# every process in CPU (`make scenarios`).
#
# Starts a platform of its own (deploy/local/platform.sh: three regions'
# booking services with their relays and consumers, routers, read model,
# Redis, NATS; its own ports and a scratch database), then runs each of
# SCENARIOS — loadtest commands separated by ';' — one after the other
# against it, and prints after each:
#
#   - the scenario's report (latencies, outcomes, the audit's checks);
#   - the load average before and after (the machine may be shared: compare
#     ratios within one run);
#   - the CPU seconds every process spent during the scenario — routers,
#     booking services, read model, NATS, Redis, the PostgreSQL backends of
#     the scratch database by the service they serve (application_name), the
#     load generator itself — and per request of the scenario;
#   - for flash-sale and clinic-opening, the report's own CPU table of the
#     same processes over the burst alone (--cpu-pids, --cpu-postgres): the
#     scenario's table also holds its seeding, its audit and the
#     generator's start;
#   - the placement look-ups the routers sent to the database, and the
#     booking services' reads of the keys of holds the sold-out cache
#     refused (keys and statements: how well a sale's losers share them).
#
# The scenarios run on one platform, so the first meets cold connection
# pools and caches and the later ones warm ones: compare like with like.
#
# Environment (defaults): SCENARIOS ("flash-sale --clients 1000 --rooms 1
# --rate 2000"), PORT_BASE (19300), PROFILE_SECONDS (10; with PROFILE_DIR a
# CPU profile of every service from the start of each scenario lands there
# as <service>-<n>.pprof), and platform.sh's BINARIES, KEEP_LOGS and LAYOUT
# (together|split: routers in their region's booking service or in processes
# of their own, ADR 0022).
set -euo pipefail

SCENARIOS="${SCENARIOS:-flash-sale --clients 1000 --rooms 1 --rate 2000}"
PORT_BASE="${PORT_BASE:-19300}"
NAME=scenarios
# shellcheck source=platform.sh
source "$(dirname "${BASH_SOURCE[0]}")/platform.sh"
platform_up

# ticks prints the CPU seconds (user + system) pid has used, 0 when gone.
ticks() { awk '{ sub(/^.*\) /, ""); split($0, f, " "); print (f[12] + f[13]) / 100 }' "/proc/$1/stat" 2>/dev/null || echo 0; }

# cpu_snapshot prints "name seconds" for every process of the platform and
# "postgres:<service>#pid seconds" for every backend of the scratch database.
cpu_snapshot() {
	local name pid app
	for name in "${!PID_OF[@]}"; do echo "$name $(ticks "${PID_OF[$name]}")"; done
	echo "redis $(ticks "$REDIS_PID")"
	echo "nats $(ticks "$NATS_PID")"
	psql "$ADMIN_URL" -AtF ' ' -c "SELECT pid, application_name FROM pg_stat_activity WHERE datname = '$DB'" 2>/dev/null |
		while read -r pid app; do echo "postgres:${app:-other}#$pid $(ticks "$pid")"; done
}

# The platform's processes by name, for a rush scenario's --cpu-pids.
cpu_pids="redis=$REDIS_PID,nats=$NATS_PID"
for name in "${!PID_OF[@]}"; do cpu_pids+=",$name=${PID_OF[$name]}"; done

# metric_sum name port…: the sum of a counter over the services' /metrics.
metric_sum() {
	local name="$1" port
	shift
	for port in "$@"; do
		curl -fsS "http://127.0.0.1:$port/metrics" 2>/dev/null || true
	done | awk -v m="$name" '$1 == m || index($1, m "{") == 1 { n += $2 } END { printf "%d\n", n }'
}

# lookups prints the placement look-ups the routers have sent to the
# database so far (berth_router_directory_refreshes_total, summed over the
# routers' ports, which serve their /metrics in either layout).
lookups() { metric_sum berth_router_directory_refreshes_total $(seq "$BASE" $((BASE + 2))); }

# key_reads prints "statements keys": the booking services' reads of the
# keys of holds the sold-out cache refused, and the keys they read.
key_reads() {
	local -a ports=($(seq $((BASE + 10)) $((BASE + 12))))
	echo "$(metric_sum berth_hold_refusal_key_reads_total "${ports[@]}") $(metric_sum berth_hold_refusal_keys_read_total "${ports[@]}")"
}

n=0
status=0
IFS=';' read -ra scenarios <<<"$SCENARIOS"
for sc in "${scenarios[@]}"; do
	read -ra args <<<"$sc"
	[[ ${#args[@]} -eq 0 ]] && continue
	n=$((n + 1))
	profiles=()
	if [[ -n "${PROFILE_DIR:-}" ]]; then
		mkdir -p "$PROFILE_DIR"
		for name in "${!PPROF_OF[@]}"; do
			curl -fsS -o "$PROFILE_DIR/$name-$n.pprof" \
				"http://127.0.0.1:${PPROF_OF[$name]}/debug/pprof/profile?seconds=${PROFILE_SECONDS:-10}" &
			profiles+=($!)
		done
	fi
	log "scenario $n: loadtest ${args[*]}; load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
	# A rush scenario also accounts its burst alone (its report's CPU table):
	# the table below divides all of a scenario's CPU — the generator's
	# start, the seeding, the audit — by its requests.
	case "${args[0]}" in
	flash-sale | clinic-opening) args+=(--cpu-pids "$cpu_pids" --cpu-postgres) ;;
	esac
	cpu_snapshot >"$WORK/cpu-before"
	lookups_before=$(lookups)
	read -r kr_before kk_before <<<"$(key_reads)"
	TIMEFORMAT="%U %S"
	{ time "$BIN/loadtest" "${args[@]}" --quiet --name "scenario-$n-$(date +%Y%m%d-%H%M%S)" >"$WORK/scenario.txt" 2>&1; } 2>"$WORK/gen-time" ||
		{ status=1 && log "scenario $n failed its checks or SLOs"; }
	cpu_snapshot >"$WORK/cpu-after"
	cat "$WORK/scenario.txt"
	log "scenario $n: placement look-ups by the routers in the database: $(($(lookups) - lookups_before))"
	read -r kr_after kk_after <<<"$(key_reads)"
	log "scenario $n: refused holds' key reads: $((kk_after - kk_before)) keys in $((kr_after - kr_before)) statements"
	log "scenario $n: load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
	# Requests: the count column of the report's table of operations.
	reqs="$(awk '$2 ~ /^[0-9]+$/ && $3 ~ /^[0-9.]+$/ && $1 ~ /^[a-z_:]+$/ { n += $2 } END { print n + 0 }' "$WORK/scenario.txt")"
	awk -v reqs="$reqs" -v gen="$(awk '{ print $1 + $2 }' "$WORK/gen-time")" '
		NR == FNR { before[$1] = $2; next }
		{ d = $2 - before[$1]; name = $1; sub(/#.*/, "", name); cpu[name] += d; total += d }
		END {
			cpu["load-generator"] = gen; total += gen
			printf "%-36s %8s %12s\n", "process", "CPU s", "ms/request"
			for (p in cpu) if (cpu[p] > 0) printf "%-36s %8.2f %12.3f\n", p, cpu[p], reqs ? 1000 * cpu[p] / reqs : 0
			printf "%-36s %8.2f %12.3f   (%d requests)\n", "total", total, reqs ? 1000 * total / reqs : 0, reqs
		}' "$WORK/cpu-before" "$WORK/cpu-after"
	[[ ${#profiles[@]} -gt 0 ]] && wait "${profiles[@]}"
done
exit "$status"
