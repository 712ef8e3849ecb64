package report

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
)

func delta(a, b float64) string {
	if a == 0 {
		if b == 0 {
			return "0%"
		}
		return "new"
	}
	return fmt.Sprintf("%+.1f%%", 100*(b-a)/a)
}

// Compare writes a table of per-operation deltas from a to b.
func Compare(w io.Writer, a, b *Report) {
	fmt.Fprintf(w, "A: %s %s (%s)\nB: %s %s (%s)\n\n", a.Scenario, a.StartedAt.Format("2006-01-02 15:04:05"), a.Status,
		b.Scenario, b.StartedAt.Format("2006-01-02 15:04:05"), b.Status)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "op\tmetric\tA\tB\tdelta\t")
	ops := map[string]bool{}
	for n := range a.Ops {
		ops[n] = true
	}
	for n := range b.Ops {
		ops[n] = true
	}
	names := make([]string, 0, len(ops))
	for n := range ops {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		x, y := a.Ops[n], b.Ops[n]
		rows := []struct {
			m    string
			a, b float64
		}{
			{"ops/s", x.Throughput, y.Throughput},
			{"p50 ms", x.P50Ms, y.P50Ms},
			{"p90 ms", x.P90Ms, y.P90Ms},
			{"p99 ms", x.P99Ms, y.P99Ms},
			{"p99.9 ms", x.P999Ms, y.P999Ms},
			{"max ms", x.MaxMs, y.MaxMs},
			{"error %", 100 * ErrorRate(x), 100 * ErrorRate(y)},
		}
		for _, r := range rows {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t\n", n, r.m, fmtNum(r.a), fmtNum(r.b), delta(r.a, r.b))
		}
	}
	tw.Flush()
}
