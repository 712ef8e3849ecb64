#!/usr/bin/env bash
# Issue 17's aims for the write path, every one measured in one run on this
# machine, with one table at the end (`make aims`).
#
# The aims are ratios to the minimal hold transaction measured by pgbench in
# the same run (a shared machine's speed drifts from one hour to the next), a
# few absolute figures, and correctness checks that must hold under load.
# The scenarios go first, on a machine left idle: their aims are latencies,
# which a machine still busy from the steps before (or slowed by minutes of
# full load) would stretch, where the ratios of the other steps carry their
# own yardstick. The steps, each on its own scratch database or platform, run
# in the order 3, 1, 2:
#
#   1. loadtest txcost --rounds 2: the store's hold in-process ÷ the minimal
#      transaction, spread (≥ 0.7 ×) and on one hot room type (≥ 3 ×);
#   2. deploy/local/cpu-per-hold.sh with HOT=1: holds through the routers ÷
#      the minimal transaction (≥ 0.25), one hot room type ÷ spread through
#      the routers (≥ 1), CPU per hold of the platform (≤ 1.5 ms, and its
#      ratio to the minimal transaction's, ≤ 4.5 ×);
#   3. deploy/local/scenarios.sh on one platform: two flash sales of 1,000
#      clients on 1 room at 2,000 arrivals/s (one winner, losers' p99 < 50
#      ms), one of 10,000 at 5,000/s (exactly one winner), and the clinic
#      opening (≥ 95 % of 480 slots, hold p99 < 500 ms, no double booking).
#
# Every step's own output goes to .local/aims/<time>/, one file per step (the
# loadtest reports they name stay in .local/loadtest/); the table is printed
# and kept there as aims.md. Exit status: 0 when every step ran and every
# correctness check passed, whether or not the performance aims were met (the
# table says); 1 when a step failed — a check (a double booking, a lost
# answer) or a loadtest's own service-level objective — or could not run.
#
# Environment (defaults): BINARIES (a directory holding booking, router,
# readmodel and loadtest binaries to measure; else this tree's, built once),
# TXCOST_DURATION (5s, each txcost leg), PORT_BASE (19500; the scenarios'
# platform uses PORT_BASE+100), LAYOUT (together|split, ADR 0022).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/../.."
log() { printf '\033[1m[aims]\033[0m %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

command -v jq >/dev/null || die "jq is required to read the scenarios' reports (apt-get install jq)"
[[ -f .local/env ]] || die ".local/env missing: run \`make deps\` first"

PORT_BASE="${PORT_BASE:-19500}"
TXCOST_DURATION="${TXCOST_DURATION:-5s}"
OUT=".local/aims/$(date -u +%Y%m%d-%H%M%S)"
mkdir -p "$OUT"

if [[ -z "${BINARIES:-}" ]]; then
	BINARIES=.local/aims/bin # one copy, rebuilt by every run
	built="this tree at $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD 2>/dev/null || echo ' with changes')"
	log "building the binaries into $BINARIES ($built)"
	go build -o "$BINARIES/" ./cmd/booking ./cmd/router ./cmd/readmodel ./loadtest
else
	built="$BINARIES"
fi
for b in booking router readmodel loadtest; do
	[[ -x "$BINARIES/$b" ]] || die "BINARIES=$BINARIES: no $b binary there"
done
export BINARIES

failed=0
# step name command…: runs the command with its output in $OUT/<name>.txt
# (and on the terminal), and remembers a failure without stopping the run.
step() {
	local name="$1"
	shift
	log "$name: $* (output in $OUT/$name.txt)"
	if ! "$@" 2>&1 | tee "$OUT/$name.txt"; then
		log "$name failed"
		failed=1
	fi
}

# busy prints the share of the machine's CPU (%) used over the next 2 s.
busy() {
	local a b
	read -r -a a < <(head -1 /proc/stat)
	sleep 2
	read -r -a b < <(head -1 /proc/stat)
	awk -v u0="${a[1]}" -v n0="${a[2]}" -v s0="${a[3]}" -v i0="${a[4]}" -v w0="${a[5]}" -v q0="${a[6]}" -v r0="${a[7]}" -v t0="${a[8]}" \
		-v u1="${b[1]}" -v n1="${b[2]}" -v s1="${b[3]}" -v i1="${b[4]}" -v w1="${b[5]}" -v q1="${b[6]}" -v r1="${b[7]}" -v t1="${b[8]}" \
		'BEGIN { used = (u1-u0)+(n1-n0)+(s1-s0)+(q1-q0)+(r1-r0)+(t1-t0); all = used+(i1-i0)+(w1-w0); printf "%.0f", all ? 100*used/all : 0 }'
}
# settle waits, at most 60 s, until the machine is idle (≤ 15 % busy over 2 s):
# the step before leaves work behind (autovacuum, a dropped database's files,
# processes exiting) that would otherwise land on the next step's first
# seconds — a cold platform's first flash sale most of all.
settle() {
	local b
	for _ in $(seq 30); do
		b=$(busy)
		((b <= 15)) && break
	done
	log "machine ${b}% busy before the next step"
}

started=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

settle
step scenarios env PORT_BASE="$((PORT_BASE + 100))" \
	SCENARIOS="flash-sale --clients 1000 --rooms 1 --rate 2000; flash-sale --clients 1000 --rooms 1 --rate 2000; flash-sale --clients 10000 --rooms 1 --rate 5000; clinic-opening" \
	bash deploy/local/scenarios.sh
settle
step txcost "$BINARIES/loadtest" txcost --rounds 2 --duration "$TXCOST_DURATION"
settle
step cpu-per-hold env HOT=1 PORT_BASE="$PORT_BASE" bash deploy/local/cpu-per-hold.sh

# first prints the first line of file matching the extended regexp, or "".
first() { grep -m1 -E "$2" "$1" 2>/dev/null || true; }
yes_no() { if [[ "$1" == *"not met"* ]]; then echo "**no**"; elif [[ "$1" == *met* ]]; then echo yes; else echo "?"; fi; }

rows=()
row() { rows+=("| $1 | $2 | $3 |"); }

# 1. txcost: "  spread ≥ 0.7 ×: by rate 0.93 (met), by CPU 1.00 (met)"
for shape in spread hot; do
	l=$(first "$OUT/txcost.txt" "^  $shape +≥ ")
	aim=$([[ $shape == spread ]] && echo "the store's hold ≥ 0.7 × the minimal transaction, spread" || echo "batching on one hot room type ≥ 3 × pgbench's one transaction per hold there")
	if [[ -n "$l" ]]; then
		by_rate=${l#*by rate }
		row "$aim (txcost, 2 rounds)" "by rate ${by_rate%%,*}; by CPU ${l#*by CPU }" "$(yes_no "${by_rate%%,*}")"
	else
		row "$aim (txcost, 2 rounds)" "not measured" "?"
	fi
done

# 2. cpu-per-hold: its lines carry "(…issue 17: …, met|not met)"; sed_expr
# turns one into the figure shown.
cph() {
	local l
	l=$(first "$OUT/cpu-per-hold.txt" "$2")
	if [[ -n "$l" ]]; then
		row "$1" "$(printf '%s' "$l" | sed -E "$3")" "$(yes_no "${l##*issue 17:}")"
	else
		row "$1" "not measured" "?"
	fi
}
cph "holds through the routers ≥ 0.25 × the minimal transaction" '^holds through the routers [0-9]' \
	's|^holds through the routers ([0-9]+/s) ÷ .* ([0-9]+/s) = ([0-9.]+) .*|\3 (\1 ÷ \2, pgbench before and after)|'
cph "through the routers: one hot room type ≥ spread" '^holds through the routers, one hot' \
	's|^.* ([0-9]+/s) ÷ spread ([0-9]+/s) .* = ([0-9.]+) .*|\3 (\1 ÷ \2)|'
cph "CPU per hold of the platform ≤ 1.5 ms (spread)" '^CPU per hold, the platform without' \
	's|^[^:]*: ([0-9.]+ ms) .*|\1|'
cph "the same ÷ the minimal transaction's CPU ≤ 4.5 × (1.5 ms against ≈ 0.33 ms)" '^CPU per hold, the platform ÷' \
	's|^.* ([0-9]+ µs) = ([0-9.]+ ×) .*|\2 (against \1)|'

# 3. scenarios: the reports they name, in order.
mapfile -t reports < <(grep -oE '^report: \S+\.json' "$OUT/scenarios.txt" | sed 's/^report: //')
# audit prints "clean" when every check of report $1 passed, else
# "**failed**" (the caller fails the run); p99 prints op $2's p99 in ms, one decimal.
audit() {
	if jq -e '[.checks[]? | select(.ok == false)] | length == 0' "$1" >/dev/null; then
		echo clean
	else
		echo "**failed**"
	fi
}
p99() { jq -r --arg op "$2" '.ops[$op].p99_ms // 0 | . * 10 | round / 10' "$1"; }
sale() {
	local f="$1" what="$2" aim_p99="$3"
	if [[ -z "$f" || ! -f "$f" ]]; then
		row "$what" "not measured" "?"
		return
	fi
	local winners lost lost_p99 checks met
	winners=$(jq -r '.figures.winners // "?"' "$f")
	lost=$(jq -r '.ops.hold_lost.outcomes.sold_out // 0' "$f")
	lost_p99=$(p99 "$f" hold_lost)
	checks=$(audit "$f")
	[[ "$checks" == clean ]] || failed=1
	met=yes
	[[ "$winners" == 1 && "$checks" == clean ]] || met="**no**"
	if [[ -n "$aim_p99" ]] && awk -v p="$lost_p99" -v a="$aim_p99" 'BEGIN { exit !(p >= a) }'; then met="**no**"; fi
	row "$what" "$winners winner(s), $lost sold_out, audit $checks; losers' p99 $lost_p99 ms" "$met"
}
sale "${reports[0]:-}" "flash sale 1,000 @ 2,000/s (first, cold platform): one winner, losers' p99 < 50 ms" 50
sale "${reports[1]:-}" "flash sale 1,000 @ 2,000/s (second): one winner, losers' p99 < 50 ms" 50
sale "${reports[2]:-}" "flash sale 10,000 @ 5,000/s: exactly one winner" ""
f="${reports[3]:-}"
if [[ -n "$f" && -f "$f" ]]; then
	booked=$(jq -r '.figures.booked // 0' "$f")
	shipped=$(jq -r '.figures.shipped_booked // 0' "$f")
	slots=$(jq -r '.figures.slots // 0' "$f")
	window_p99=$(p99 "$f" hold)
	shipped_p99=$(p99 "$f" shipped:hold)
	checks=$(audit "$f")
	[[ "$checks" == clean ]] || failed=1
	met=$(awk -v b="$booked" -v s="$shipped" -v n="$slots" -v p="$window_p99" -v q="$shipped_p99" -v a="$checks" \
		'BEGIN { print (n > 0 && b >= 0.95 * n && s >= 0.95 * n && p < 500 && q < 500 && a == "clean") ? "yes" : "**no**" }')
	row "clinic opening: ≥ 95 % of the slots, hold p99 < 500 ms, no double booking" \
		"$booked of $slots (window patients), $shipped of $slots (shipped patients); hold p99 $window_p99 / $shipped_p99 ms; audit $checks" "$met"
else
	row "clinic opening: ≥ 95 % of the slots, hold p99 < 500 ms, no double booking" "not measured" "?"
fi

{
	echo "# Issue 17's aims, one run"
	echo
	echo "$started to $(date -u '+%H:%M:%S UTC'), $(grep -m1 'model name' /proc/cpuinfo | sed 's/.*: //'), $(nproc) cores;"
	echo "load average $load_before before, $(cut -d' ' -f1-3 /proc/loadavg) after; binaries: $built."
	echo "Every step's output: $OUT/."
	echo
	echo "| aim | measured | met? |"
	echo "|---|---|---|"
	printf '%s\n' "${rows[@]}"
} | tee "$OUT/aims.md"
[[ $failed == 0 ]] || log "a step or a correctness check failed: see $OUT/"
exit "$failed"
