package report

import (
	"bytes"
	"fmt"
	"html/template"
	"math"
	"sort"
	"strings"
)

// palette is a colour-blind friendly set (Okabe–Ito).
var palette = []string{"#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000"}

func colour(i int) string { return palette[i%len(palette)] }

// series is one line of a chart.
type series struct {
	Name   string
	Values []float64 // NaN: no point
	Dashed bool
}

const (
	chartW, chartH         = 860, 260
	padL, padR, padT, padB = 60, 170, 28, 34
)

// niceMax rounds up to 1, 2 or 5 × 10^k.
func niceMax(v float64) float64 {
	if v <= 0 || math.IsNaN(v) {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// lineChart renders series over x = 0..n-1 seconds as an inline SVG.
func lineChart(title, unit string, xs []int, ss []series) template.HTML {
	var b strings.Builder
	maxY := 0.0
	for _, s := range ss {
		for _, v := range s.Values {
			if !math.IsNaN(v) && v > maxY {
				maxY = v
			}
		}
	}
	maxY = niceMax(maxY)
	maxX := 1
	if len(xs) > 0 && xs[len(xs)-1] > 0 {
		maxX = xs[len(xs)-1]
	}
	pw, ph := float64(chartW-padL-padR), float64(chartH-padT-padB)
	x := func(t int) float64 { return padL + pw*float64(t)/float64(maxX) }
	y := func(v float64) float64 { return padT + ph*(1-v/maxY) }
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" role="img">`, chartW, chartH, chartW, chartH)
	fmt.Fprintf(&b, `<text x="%d" y="16" font-weight="bold">%s</text>`, padL, template.HTMLEscapeString(title))
	for i := 0; i <= 4; i++ {
		v := maxY * float64(i) / 4
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#ddd"/>`, padL, chartW-padR, y(v), y(v))
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end" font-size="11">%s</text>`, padL-4, y(v)+4, fmtNum(v))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11">%s</text>`, 4, padT-6, template.HTMLEscapeString(unit))
	for i := 0; i <= 5; i++ {
		t := maxX * i / 5
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" font-size="11">%ds</text>`, x(t), chartH-padB+16, t)
	}
	for i, s := range ss {
		var pts []string
		flush := func() {
			if len(pts) > 0 {
				dash := ""
				if s.Dashed {
					dash = ` stroke-dasharray="5,3"`
				}
				fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="1.5"%s points="%s"/>`, colour(i), dash, strings.Join(pts, " "))
				pts = nil
			}
		}
		for j, v := range s.Values {
			if math.IsNaN(v) || j >= len(xs) {
				flush()
				continue
			}
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(xs[j]), y(v)))
		}
		if len(pts) == 1 { // a single point: draw a dot
			fmt.Fprintf(&b, `<circle cx="%s" r="2" fill="%s" cy="%s"/>`, strings.Split(pts[0], ",")[0], colour(i), strings.Split(pts[0], ",")[1])
		}
		flush()
		ly := padT + 14*i
		fmt.Fprintf(&b, `<line x1="%d" x2="%d" y1="%d" y2="%d" stroke="%s" stroke-width="3"/>`, chartW-padR+8, chartW-padR+24, ly, ly, colour(i))
		fmt.Fprintf(&b, `<text x="%d" y="%d" font-size="11">%s</text>`, chartW-padR+28, ly+4, template.HTMLEscapeString(s.Name))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// outcomeBars renders one horizontal stacked bar per operation.
func outcomeBars(r *Report) template.HTML {
	names := r.OpNames()
	if len(names) == 0 {
		return ""
	}
	kinds := map[string]bool{}
	for _, n := range names {
		for k := range r.Ops[n].Outcomes {
			kinds[k] = true
		}
	}
	order := make([]string, 0, len(kinds))
	for k := range kinds {
		order = append(order, k)
	}
	sort.Slice(order, func(i, j int) bool { // ok first, then alphabetical
		if (order[i] == "ok") != (order[j] == "ok") {
			return order[i] == "ok"
		}
		return order[i] < order[j]
	})
	rowH, labelW, barW := 22, 150, chartW-padR-150
	h := padT + rowH*len(names) + 10
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" role="img"><text x="4" y="16" font-weight="bold">Outcome mix per operation</text>`, chartW, max(h, padT+14*len(order)+10))
	for i, n := range names {
		st := r.Ops[n]
		var total int64
		for _, v := range st.Outcomes {
			total += v
		}
		yy := padT + rowH*i
		fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="end" font-size="12">%s</text>`, labelW-6, yy+14, template.HTMLEscapeString(n))
		off := 0.0
		for ci, k := range order {
			v := st.Outcomes[k]
			if v == 0 || total == 0 {
				continue
			}
			w := float64(barW) * float64(v) / float64(total)
			fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s %s: %d (%.2f%%)</title></rect>`,
				float64(labelW)+off, yy, w, rowH-4, colour(ci), template.HTMLEscapeString(n), template.HTMLEscapeString(k), v, 100*float64(v)/float64(total))
			off += w
		}
	}
	for ci, k := range order {
		ly := padT + 14*ci
		fmt.Fprintf(&b, `<rect x="%d" y="%d" width="12" height="10" fill="%s"/><text x="%d" y="%d" font-size="11">%s</text>`,
			chartW-padR+8, ly-4, colour(ci), chartW-padR+24, ly+5, template.HTMLEscapeString(k))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

func fmtNum(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v >= 100:
		return fmt.Sprintf("%.0f", v)
	case v >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// charts builds the timeline charts of a report.
func charts(r *Report) []template.HTML {
	xs := make([]int, len(r.Timeline))
	for i, s := range r.Timeline {
		xs[i] = s.T
	}
	names := r.OpNames()
	var lat, thr []series
	for _, n := range names {
		p50 := make([]float64, len(r.Timeline))
		p99 := make([]float64, len(r.Timeline))
		cnt := make([]float64, len(r.Timeline))
		for i, s := range r.Timeline {
			p, ok := s.Ops[n]
			if !ok {
				p50[i], p99[i] = math.NaN(), math.NaN()
				continue
			}
			p50[i], p99[i], cnt[i] = p.P50Ms, p.P99Ms, float64(p.Count)
		}
		lat = append(lat, series{Name: n + " p99", Values: p99}, series{Name: n + " p50", Values: p50, Dashed: true})
		thr = append(thr, series{Name: n, Values: cnt})
	}
	out := []template.HTML{
		lineChart("Latency over time (per second, from intended start)", "ms", xs, lat),
		lineChart("Throughput (completions per second)", "ops/s", xs, thr),
		outcomeBars(r),
	}
	if len(r.Samples) > 0 {
		keys := map[string]bool{}
		for _, s := range r.Samples {
			for k := range s.Values {
				keys[k] = true
			}
		}
		var ks []string
		for k := range keys {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		sx := make([]int, len(r.Samples))
		for i, s := range r.Samples {
			sx[i] = int(s.T)
		}
		for _, k := range ks {
			v := make([]float64, len(r.Samples))
			for i, s := range r.Samples {
				if x, ok := s.Values[k]; ok {
					v[i] = x
				} else {
					v[i] = math.NaN()
				}
			}
			out = append(out, lineChart("Gauge: "+k, k, sx, []series{{Name: k, Values: v}}))
		}
	}
	return out
}

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"errrate": func(r *Report, op string) string { return fmt.Sprintf("%.3f%%", 100*ErrorRate(r.Ops[op])) },
	"outcomes": func(m map[string]int64) string {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s=%d", k, m[k]))
		}
		return strings.Join(parts, " ")
	},
	"f": fmtNum,
}).Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Berth loadtest — {{.R.Scenario}}</title>
<style>
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1000px}
table{border-collapse:collapse;margin:8px 0 18px}td,th{border:1px solid #ccc;padding:3px 8px;text-align:right;font-size:13px}
th{background:#f3f3f3}td.l,th.l{text-align:left}.pass{color:#067d3a;font-weight:bold}.fail{color:#b00020;font-weight:bold}
.skipped{color:#8a6d00;font-weight:bold}svg{display:block;margin:10px 0 22px;font-family:system-ui,sans-serif}
code{background:#f5f5f5;padding:1px 4px}
</style></head><body>
<h1>{{.R.Scenario}} — <span class="{{.R.Status}}">{{.R.Status}}</span></h1>
<p>Started {{.R.StartedAt.Format "2006-01-02 15:04:05 MST"}} on <code>{{.R.Host}}</code>; {{printf "%.1f" .R.Engine.ElapsedS}} s;
scheduled {{.R.Engine.Scheduled}}, completed {{.R.Engine.Completed}}, dropped {{.R.Engine.Dropped}}{{if .R.Engine.ClosedLoop}} (closed loop){{end}}.<br>
<code>{{.R.Command}}</code></p>
{{range .R.Notes}}<p>⚠ {{.}}</p>{{end}}
<h2>Operations</h2>
<table><tr><th class="l">op</th><th>count</th><th>ops/s</th><th>p50 ms</th><th>p90 ms</th><th>p99 ms</th><th>p99.9 ms</th><th>max ms</th><th>errors</th><th class="l">outcomes</th></tr>
{{range $n := .R.OpNames}}{{with index $.R.Ops $n}}<tr><td class="l">{{$n}}</td><td>{{.Count}}</td><td>{{f .Throughput}}</td><td>{{f .P50Ms}}</td><td>{{f .P90Ms}}</td><td>{{f .P99Ms}}</td><td>{{f .P999Ms}}</td><td>{{f .MaxMs}}</td><td>{{errrate $.R $n}}</td><td class="l">{{outcomes .Outcomes}}</td></tr>{{end}}{{end}}
</table>
<h2>Audit</h2>
<table><tr><th class="l">check</th><th class="l">result</th><th class="l">detail</th></tr>
{{range .R.Checks}}<tr><td class="l">{{.Name}}</td><td class="l {{if .Skipped}}skipped{{else if .OK}}pass{{else}}fail{{end}}">{{if .Skipped}}skipped{{else if .OK}}ok{{else}}VIOLATED{{end}}</td><td class="l">{{.Detail}}</td></tr>{{end}}
</table>
{{if .R.SLO}}<h2>SLOs</h2>
<table><tr><th class="l">objective</th><th>limit</th><th>actual</th><th class="l">result</th></tr>
{{range .R.SLO}}<tr><td class="l">{{.Name}}</td><td>{{f .Limit}}</td><td>{{f .Actual}}</td><td class="l {{if .OK}}pass{{else}}fail{{end}}">{{if .OK}}met{{else}}MISSED{{end}}</td></tr>{{end}}
</table>{{end}}
{{if .R.Figures}}<h2>Figures</h2><table>{{range $k, $v := .R.Figures}}<tr><td class="l">{{$k}}</td><td>{{f $v}}</td></tr>{{end}}</table>{{end}}
<h2>Plots</h2>
{{range .Charts}}{{.}}{{end}}
</body></html>
`))

// HTML renders r as a self-contained page: inline CSS and SVG, no scripts,
// no network.
func HTML(r *Report) ([]byte, error) {
	var b bytes.Buffer
	if err := page.Execute(&b, map[string]any{"R": r, "Charts": charts(r)}); err != nil {
		return nil, fmt.Errorf("render html report: %w", err)
	}
	return b.Bytes(), nil
}
