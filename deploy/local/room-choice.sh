#!/usr/bin/env bash
# The check-in's room choice at two hotel sizes, before and after it read
# the taken rooms once (internal/postgres/stays.go, freeRoomsSQL), with
# pgbench on the PostgreSQL of `make deps`.
#
# A scratch database gets this tree's schema (booking migrate), then two
# hotels of SIZES standard rooms (default "182 728": the check-in morning's
# hotels at --arrivals 200 and 800) with a year of past stays in
# room_nights and half their rooms taken for tonight and tomorrow (the
# middle of a check-in morning), among OTHER_HOTELS (300) hotels of 100
# rooms. For each size, pgbench runs the room choice — BEGIN, the SELECT …
# FOR UPDATE SKIP LOCKED, ROLLBACK — on one connection for DURATION (10)
# seconds, prepared as the store's driver prepares its statements: "before" is the NOT EXISTS probe of every room, "after" the
# hashed NOT IN over room_nights_type_night_idx. It prints the choices per
# second and the ratios, and EXPLAIN (ANALYZE, BUFFERS) of both at the
# larger size. The scratch database is dropped on exit.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
SIZES="${SIZES:-182 728}"
OTHER_HOTELS="${OTHER_HOTELS:-300}"
DURATION="${DURATION:-10}"
log() { printf '\033[1m[room-choice]\033[0m %s\n' "$*" >&2; }
[[ -f .local/env ]] || { log ".local/env missing: run \`make deps\` first"; exit 1; }
set -a
# shellcheck disable=SC1091
source .local/env
set +a
ADMIN_URL="${BERTH_TEST_DATABASE_URL:?}"
DB="berth_room_choice_$(date +%s)_$$"
DB_URL="${ADMIN_URL%%\?*}"
DB_URL="${DB_URL%/*}/$DB"
[[ "$ADMIN_URL" == *\?* ]] && DB_URL+="?${ADMIN_URL#*\?}"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/berth-room-choice.XXXXXX")"
trap 'psql "$ADMIN_URL" -qc "DROP DATABASE IF EXISTS $DB WITH (FORCE)" >/dev/null 2>&1 || true; rm -rf "$WORK"' EXIT

go build -o "$WORK/" ./cmd/booking
psql "$ADMIN_URL" -qc "CREATE DATABASE $DB" >/dev/null
BERTH_DATABASE_URL="$DB_URL" "$WORK/booking" migrate >"$WORK/migrate.log" 2>&1 || { tail -5 "$WORK/migrate.log"; exit 1; }

log "seeding: hotels of $SIZES rooms, $OTHER_HOTELS others, a year of past stays"
for size in $SIZES; do
	psql "$DB_URL" -v ON_ERROR_STOP=1 -q <<SQL
INSERT INTO rooms (hotel_id, room_id, home_region, room_type_id, number, floor)
SELECT md5('hotel-$size')::UUID, gen_random_uuid(), 'us-east', md5('type-$size')::UUID, 'S' || lpad(i::TEXT, 4, '0'), 1 + i / 50
FROM generate_series(1, $size) i;
INSERT INTO room_nights (hotel_id, room_id, night, home_region, room_type_id, reservation_id)
SELECT m.hotel_id, m.room_id, d::DATE, m.home_region, m.room_type_id, gen_random_uuid()
FROM rooms m CROSS JOIN generate_series(current_date - 365, current_date - 1, INTERVAL '1 day') d
WHERE m.hotel_id = md5('hotel-$size')::UUID;
-- Half the rooms, first in the desk's order, are taken tonight and tomorrow.
INSERT INTO room_nights (hotel_id, room_id, night, home_region, room_type_id, reservation_id)
SELECT m.hotel_id, m.room_id, d::DATE, m.home_region, m.room_type_id, gen_random_uuid()
FROM (SELECT * FROM rooms WHERE hotel_id = md5('hotel-$size')::UUID ORDER BY floor, number LIMIT $size / 2) m
CROSS JOIN generate_series(current_date, current_date + 1, INTERVAL '1 day') d;
SQL
done
psql "$DB_URL" -v ON_ERROR_STOP=1 -q <<SQL
CREATE TEMP TABLE oh AS SELECT gen_random_uuid() h, gen_random_uuid() t FROM generate_series(1, $OTHER_HOTELS);
INSERT INTO rooms (hotel_id, room_id, home_region, room_type_id, number, floor)
SELECT oh.h, gen_random_uuid(), 'us-east', oh.t, 'R' || i, 1 + i / 50 FROM oh CROSS JOIN generate_series(1, 100) i;
INSERT INTO room_nights (hotel_id, room_id, night, home_region, room_type_id, reservation_id)
SELECT m.hotel_id, m.room_id, d::DATE, m.home_region, m.room_type_id, gen_random_uuid()
FROM rooms m JOIN oh ON oh.h = m.hotel_id CROSS JOIN generate_series(current_date - 20, current_date + 9, INTERVAL '1 day') d;
VACUUM ANALYZE rooms;
VACUUM ANALYZE room_nights;
SQL

# before: the statement up to this change; after: freeRoomsSQL.
before() {
	cat <<SQL
SELECT m.room_id::TEXT, m.number, m.room_type_id::TEXT FROM rooms m
	WHERE m.hotel_id = md5('hotel-$1')::UUID AND m.room_type_id = md5('type-$1')::UUID AND m.room_id <> ALL('{}'::UUID[])
	  AND NOT EXISTS (SELECT 1 FROM room_nights n WHERE n.hotel_id = m.hotel_id AND n.room_id = m.room_id
	                  AND n.night >= current_date AND n.night < current_date + 2)
	ORDER BY m.floor, m.number, m.room_id LIMIT 1 FOR UPDATE OF m SKIP LOCKED;
SQL
}
after() {
	cat <<SQL
SELECT m.room_id::TEXT, m.number, m.room_type_id::TEXT FROM rooms m
	WHERE m.hotel_id = md5('hotel-$1')::UUID AND m.room_type_id = md5('type-$1')::UUID AND m.room_id <> ALL('{}'::UUID[])
	  AND m.room_id NOT IN (SELECT n.room_id FROM room_nights n WHERE n.hotel_id = md5('hotel-$1')::UUID
	                        AND n.room_type_id = md5('type-$1')::UUID AND n.night >= current_date AND n.night < current_date + 2)
	ORDER BY m.floor, m.number, m.room_id LIMIT 1 FOR UPDATE OF m SKIP LOCKED;
SQL
}
log "load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A tps
for size in $SIZES; do
	for leg in before after; do
		{ echo "BEGIN;"; "$leg" "$size" | tr '\n\t' '  '; echo; echo "ROLLBACK;"; } >"$WORK/$leg-$size.sql"
		tps[$leg-$size]="$(pgbench -n -M prepared -c 1 -T "$DURATION" -f "$WORK/$leg-$size.sql" "$DB_URL" 2>/dev/null |
			awk '/^tps/ { printf "%.0f", $3 }')"
		printf '%-7s %5s rooms: %6s room choices/s\n' "$leg" "$size" "${tps[$leg-$size]}"
	done
	awk -v b="${tps[before-$size]}" -v a="${tps[after-$size]}" -v s="$size" \
		'BEGIN { printf "        %5s rooms: after / before = %.1f\n", s, a / b }'
done
log "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
read -r small large <<<"$SIZES"
for leg in before after; do
	awk -v s="${tps[$leg-$small]}" -v l="${tps[$leg-$large]}" -v leg="$leg" -v a="$small" -v b="$large" \
		'BEGIN { printf "%-7s %s → %s rooms: choices/s × %.2f\n", leg, a, b, l / s }'
done
for leg in before after; do
	echo "== EXPLAIN $leg, $large rooms"
	psql "$DB_URL" -qc "BEGIN" -c "EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) $("$leg" "$large")" -c "ROLLBACK" |
		grep -E 'Execution Time|^   Buffers: shared' | head -2
done
