// Package report is the output of a loadtest run: the JSON document every
// run writes, its self-contained HTML rendering, the SLO check that turns
// it into an exit code, and the comparison of two runs.
package report

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/berthhq/berth/loadtest/internal/cpu"
	"github.com/berthhq/berth/loadtest/internal/engine"
)

// Status of a run.
const (
	StatusPass    = "pass"
	StatusFail    = "fail"
	StatusSkipped = "skipped"
)

// Check is one audited invariant or scenario assertion.
type Check struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
	// Skipped checks (a table that does not exist yet, no read model) are
	// listed with OK true and Skipped set, so a reader sees what was not
	// verified.
	Skipped bool `json:"skipped,omitempty"`
}

// Sample is one observation of a gauge over time (soak drift watching).
type Sample struct {
	T      float64            `json:"t"`
	Values map[string]float64 `json:"values"`
}

// Report is one run.
type Report struct {
	Scenario  string                    `json:"scenario"`
	Status    string                    `json:"status"`
	StartedAt time.Time                 `json:"started_at"`
	Host      string                    `json:"host"`
	Command   string                    `json:"command"`
	Config    map[string]any            `json:"config"`
	Targets   map[string]string         `json:"targets,omitempty"`
	Engine    engine.Result             `json:"engine"`
	Ops       map[string]engine.OpStats `json:"ops"`
	Timeline  []engine.Second           `json:"timeline"`
	Samples   []Sample                  `json:"samples,omitempty"`
	Checks    []Check                   `json:"checks"`
	SLO       []SLOResult               `json:"slo"`
	Figures   map[string]float64        `json:"figures,omitempty"`
	// CPU is the CPU time per operation of each accounted process, one
	// table per measured leg (loadtest baseline --cpu-pids).
	CPU   []CPUTable `json:"cpu,omitempty"`
	Notes []string   `json:"notes,omitempty"`
}

// CPUTable is the CPU the accounted processes used during one leg.
type CPUTable struct {
	Op      string    `json:"op"`
	Ops     int64     `json:"ops"`      // operations completed in the leg
	WallS   float64   `json:"wall_s"`   // the interval measured
	LoadAvg []float64 `json:"load_avg"` // 1-minute load average before and after
	Rows    []cpu.Row `json:"rows"`
	TotalS  float64   `json:"total_cpu_s"`
	TotalMs float64   `json:"total_ms_per_op"`
	// PlatformS and PlatformMs leave the load generator out: the
	// platform's own processes (services, read model, NATS, Redis,
	// PostgreSQL), the list issue 17's CPU-per-hold aim sums.
	PlatformS  float64 `json:"platform_cpu_s"`
	PlatformMs float64 `json:"platform_ms_per_op"`
	// PlatformSwitches is how many times the platform's threads were
	// switched onto a CPU (cpu.Switches), PlatformSwitchesPerOp per
	// operation: the round trips between its processes, counted.
	PlatformSwitches      int64   `json:"platform_switches"`
	PlatformSwitchesPerOp float64 `json:"platform_switches_per_op"`
}

// Failed lists the failed checks.
func (r *Report) Failed() []Check {
	var out []Check
	for _, c := range r.Checks {
		if !c.OK {
			out = append(out, c)
		}
	}
	return out
}

// SLOMissed lists the missed objectives.
func (r *Report) SLOMissed() []SLOResult {
	var out []SLOResult
	for _, s := range r.SLO {
		if !s.OK {
			out = append(out, s)
		}
	}
	return out
}

// Finish sets Status from the checks and SLOs (unless skipped).
func (r *Report) Finish() {
	if r.Status == StatusSkipped {
		return
	}
	r.Status = StatusPass
	if len(r.Failed()) > 0 || len(r.SLOMissed()) > 0 {
		r.Status = StatusFail
	}
}

// OpNames returns the operation names, sorted.
func (r *Report) OpNames() []string {
	names := make([]string, 0, len(r.Ops))
	for n := range r.Ops {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Write stores the report as <base>.json and <base>.html in dir and returns
// the two paths.
func (r *Report) Write(dir, base string) (string, string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("report dir: %w", err)
	}
	jsonPath := filepath.Join(dir, base+".json")
	htmlPath := filepath.Join(dir, base+".html")
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", "", fmt.Errorf("encode report: %w", err)
	}
	if err := os.WriteFile(jsonPath, data, 0o644); err != nil {
		return "", "", fmt.Errorf("write report: %w", err)
	}
	html, err := HTML(r)
	if err != nil {
		return "", "", err
	}
	if err := os.WriteFile(htmlPath, html, 0o644); err != nil {
		return "", "", fmt.Errorf("write html report: %w", err)
	}
	return jsonPath, htmlPath, nil
}

// Load reads a JSON report.
func Load(path string) (*Report, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read report: %w", err)
	}
	var r Report
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("decode report %s: %w", path, err)
	}
	return &r, nil
}

// ExpectedOutcomes are answers that are correct behaviour under load, not
// errors: losing a race is a 409, by contract.
var ExpectedOutcomes = map[string]bool{
	"ok": true, "sold_out": true, "slot_taken": true, "hold_expired": true, "invalid_state": true,
	// A check-in or an upgrade refused because the rooms ran out: the desk walks the guest.
	"no_room_free": true,
	// A clinic hold during an active waiting-room window, before the patient
	// joined the room: the contract's signal to queue (the patient then does).
	"waiting_room": true,
}

// ErrorRate is the share of an operation's answers that are errors.
func ErrorRate(st engine.OpStats) float64 {
	var total, bad int64
	for k, v := range st.Outcomes {
		total += v
		if !ExpectedOutcomes[k] {
			bad += v
		}
	}
	if total == 0 {
		return 0
	}
	return float64(bad) / float64(total)
}
