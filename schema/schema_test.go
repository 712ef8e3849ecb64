package schema_test

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"

	"github.com/berthhq/berth/schema"
)

func readAll(t *testing.T, fsys fs.FS, glob string) map[string]string {
	t.Helper()
	names, err := fs.Glob(fsys, glob)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, n := range names {
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			t.Fatal(err)
		}
		out[n] = string(b)
	}
	return out
}

// stripComments removes SQL line comments.
func stripComments(s string) string {
	var b strings.Builder
	for _, line := range strings.Split(s, "\n") {
		if i := strings.Index(line, "--"); i >= 0 {
			line = line[:i]
		}
		b.WriteString(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// The shared schema runs on PostgreSQL and CockroachDB: no engine-specific
// statements, and one DDL statement per migration step (CockroachDB commits
// DDL piecewise, so a half-applied multi-statement step cannot be retried).
func TestSharedSchemaIsPortable(t *testing.T) {
	t.Parallel()
	forbidden := []*regexp.Regexp{
		regexp.MustCompile(`(?i)\bUPSERT\b`), regexp.MustCompile(`(?i)AS\s+OF\s+SYSTEM\s+TIME`),
		regexp.MustCompile(`(?i)pg_advisory`), regexp.MustCompile(`(?i)\bLISTEN\b`), regexp.MustCompile(`(?i)\bNOTIFY\b`),
		regexp.MustCompile(`(?i)\bTRIGGER\b`), regexp.MustCompile(`(?i)\bDEFERRABLE\b`), regexp.MustCompile(`(?i)\b(BIG|SMALL)?SERIAL\b`),
		regexp.MustCompile(`(?i)\b(INT4|INT8|NUM|TS|TSTZ|DATE)RANGE\b`), regexp.MustCompile(`(?i)\bcrdb_`),
		regexp.MustCompile(`(?i)\bINT\b`), regexp.MustCompile(`(?i)\bINTEGER\b`),
	}
	files := readAll(t, schema.Migrations, "*.sql")
	if len(files) == 0 {
		t.Fatal("no migrations found")
	}
	for name, body := range files {
		up, _, _ := strings.Cut(body, "-- +goose Down")
		code := stripComments(up)
		for _, re := range forbidden {
			if re.MatchString(code) {
				t.Errorf("%s: engine-specific or ambiguous SQL %q", name, re.String())
			}
		}
		if n := strings.Count(strings.TrimSpace(code), ";"); n != 1 {
			t.Errorf("%s: %d statements in the Up step, want exactly one", name, n)
		}
	}
}

var (
	createTable = regexp.MustCompile(`(?is)CREATE\s+TABLE\s+(\w+)\s*\((.*)\)`)
	addRegion   = regexp.MustCompile(`(?i)ALTER\s+TABLE\s+(\w+)\s+ADD\s+COLUMN\s+IF\s+NOT\s+EXISTS\s+crdb_region\s+crdb_internal_region\s+.*AS\s*\(\s*home_region::crdb_internal_region\s*\)\s*STORED`)
	byRow       = regexp.MustCompile(`(?i)ALTER\s+TABLE\s+(\w+)\s+SET\s+LOCALITY\s+REGIONAL\s+BY\s+ROW\s+AS\s+crdb_region`)
	global      = regexp.MustCompile(`(?i)ALTER\s+TABLE\s+(\w+)\s+SET\s+LOCALITY\s+GLOBAL`)
)

// Every partition table of the shared schema (one that carries home_region)
// has its CockroachDB overlay: a stored crdb_region computed from
// home_region and REGIONAL BY ROW locality; the placement directory is
// GLOBAL. No CockroachDB server or parser can be had here, so this checks the
// overlay's statements by their text.
func TestCockroachOverlayCoversEveryPartitionTable(t *testing.T) {
	t.Parallel()
	partition := map[string]bool{}
	for name, body := range readAll(t, schema.Migrations, "*.sql") {
		up, _, _ := strings.Cut(body, "-- +goose Down")
		m := createTable.FindStringSubmatch(stripComments(up))
		if m == nil {
			continue
		}
		if regexp.MustCompile(`(?i)\bhome_region\s+TEXT\b`).MatchString(m[2]) {
			partition[m[1]] = true
			if m[1] != "placements" && !regexp.MustCompile(`(?is)PRIMARY\s+KEY\s*\(\s*(\w+_id|partition_id)`).MatchString(m[2]) {
				t.Errorf("%s: partition table %s must key by its partition id first", name, m[1])
			}
		}
	}
	delete(partition, "placements") // the directory: GLOBAL, checked below
	hasRegion, hasByRow, isGlobal := map[string]bool{}, map[string]bool{}, map[string]bool{}
	for _, body := range readAll(t, schema.Cockroach, "cockroach/*.sql") {
		code := stripComments(body)
		for _, m := range addRegion.FindAllStringSubmatch(code, -1) {
			hasRegion[m[1]] = true
		}
		for _, m := range byRow.FindAllStringSubmatch(code, -1) {
			hasByRow[m[1]] = true
		}
		for _, m := range global.FindAllStringSubmatch(code, -1) {
			isGlobal[m[1]] = true
		}
	}
	if len(partition) < 5 {
		t.Fatalf("found only %d partition tables; the parser is broken", len(partition))
	}
	for table := range partition {
		if !hasRegion[table] {
			t.Errorf("overlay lacks the crdb_region column of %s", table)
		}
		if !hasByRow[table] {
			t.Errorf("overlay lacks REGIONAL BY ROW for %s", table)
		}
	}
	if !isGlobal["placements"] {
		t.Error("overlay must make placements GLOBAL")
	}
}

// Two branches that each add migration NNNNN land side by side without a
// textual conflict, and goose then refuses to load either: every version
// must belong to one file.
func TestMigrationVersionsAreUnique(t *testing.T) {
	t.Parallel()
	seen := map[string]string{}
	for name := range readAll(t, schema.Migrations, "*.sql") {
		version, _, _ := strings.Cut(name, "_")
		if other, dup := seen[version]; dup {
			t.Errorf("migration version %s is used by %s and %s", version, other, name)
		}
		seen[version] = name
	}
	if len(seen) < 10 {
		t.Fatalf("found only %d migrations; has the layout changed?", len(seen))
	}
}
