// Package cpu accounts the CPU time of the processes behind a load test
// (routers, booking services, the read model, NATS, Redis, the PostgreSQL
// backends of one database, the generator itself) from /proc/<pid>/stat,
// so a run can say what one operation costs in CPU across the platform.
// CPU time per operation is far less sensitive to a shared machine's load
// than rates are: it is the figure to compare between builds.
package cpu

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strconv"
	"strings"
	"time"
)

// ticksPerSecond is USER_HZ, the unit of utime and stime in /proc/<pid>/stat:
// 100 on every Linux ABI Go supports (the kernel exports it as such whatever
// its internal HZ).
const ticksPerSecond = 100

// Proc is one process to account, named for the table (e.g. router-us-east).
type Proc struct {
	Name string
	PID  int
}

// ParseProcs reads "name=pid,name=pid" (the --cpu-pids flag).
func ParseProcs(s string) ([]Proc, error) {
	var out []Proc
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		name, pid, ok := strings.Cut(part, "=")
		n, err := strconv.Atoi(pid)
		if !ok || name == "" || err != nil || n <= 0 {
			return nil, fmt.Errorf("%q: want name=pid", part)
		}
		out = append(out, Proc{Name: name, PID: n})
	}
	return out, nil
}

// Time is the CPU time (user + system, every thread) pid has used so far.
func Time(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStat(b)
}

// Switches is how many times the threads of pid have been switched onto a
// CPU so far: the third field of each thread's
// /proc/<pid>/task/<tid>/schedstat. Each is a thread woken after it slept
// (a message it waited for, a lock, a timer) or run again after a
// preemption: on a virtual machine, a round trip between two processes
// costs about as much in these switches as in the work it carries, so the
// count per operation is a figure to compare between builds that is not
// moved by the host's speed as CPU time is. Threads that ended are not
// counted; a kernel without schedstat counts 0.
func Switches(pid int) (int64, error) {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		return 0, err
	}
	var n int64
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/schedstat")
		if err != nil {
			continue // the thread ended meanwhile, or no schedstat
		}
		if v, err := parseSchedstat(b); err == nil {
			n += v
		}
	}
	return n, nil
}

// parseSchedstat reads the count of timeslices (the third field) from a
// schedstat line: "<ns on cpu> <ns waiting> <timeslices>".
func parseSchedstat(b []byte) (int64, error) {
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return 0, errors.New("schedstat: too few fields")
	}
	return strconv.ParseInt(f[2], 10, 64)
}

// parseStat reads utime and stime from a /proc/<pid>/stat line. The command
// name (field 2) is in parentheses and may hold spaces and parentheses of
// its own, so the fields are counted from the last ')'.
func parseStat(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, errors.New("stat: no command name")
	}
	f := strings.Fields(string(b[i+1:]))
	// After the name: state(3) ppid(4) … utime(14) stime(15), i.e. f[11], f[12].
	if len(f) < 13 {
		return 0, errors.New("stat: too few fields")
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("stat: utime %q stime %q", f[11], f[12])
	}
	return time.Duration(u+s) * time.Second / ticksPerSecond, nil
}

// Row is one process's share of a measured interval.
type Row struct {
	Name    string  `json:"name"`
	PIDs    int     `json:"pids"` // processes summed into the row (PostgreSQL backends: several)
	Seconds float64 `json:"cpu_s"`
	MsPerOp float64 `json:"ms_per_op"`
	// Switches is how many times the row's threads were switched onto a
	// CPU in the interval (Switches), SwitchesPerOp per operation.
	Switches      int64   `json:"switches"`
	SwitchesPerOp float64 `json:"switches_per_op"`
	Incomplete    bool    `json:"incomplete,omitempty"` // a process ended during the interval: its last CPU is missing
}

// usage is what a sample reads of one process.
type usage struct {
	cpu      time.Duration
	switches int64
}

// Meter samples a fixed set of processes plus, each time, the processes a
// discover function names (the backends connected to one database), which
// come and go: a backend that starts during the interval counts from zero,
// one that ends is marked incomplete.
type Meter struct {
	procs    []Proc
	discover func(context.Context) ([]Proc, error)
	before   map[Proc]usage
	start    time.Time
}

// NewMeter accounts procs and the processes discover returns (nil: none).
func NewMeter(procs []Proc, discover func(context.Context) ([]Proc, error)) *Meter {
	return &Meter{procs: procs, discover: discover}
}

func (m *Meter) sample(ctx context.Context) (map[Proc]usage, error) {
	all := append([]Proc(nil), m.procs...)
	if m.discover != nil {
		more, err := m.discover(ctx)
		if err != nil {
			return nil, err
		}
		all = append(all, more...)
	}
	out := make(map[Proc]usage, len(all))
	for _, p := range all {
		u, err := read(p.PID)
		if err != nil {
			if m.before != nil {
				continue // ended meanwhile: Stop marks it
			}
			return nil, fmt.Errorf("cpu of %s (pid %d): %w", p.Name, p.PID, err)
		}
		out[p] = u
	}
	return out, nil
}

// read reads what a sample keeps of pid.
func read(pid int) (usage, error) {
	t, err := Time(pid)
	if err != nil {
		return usage{}, err
	}
	n, err := Switches(pid)
	return usage{cpu: t, switches: n}, err
}

// Start takes the first sample.
func (m *Meter) Start(ctx context.Context) error {
	m.before = nil
	b, err := m.sample(ctx)
	if err != nil {
		return err
	}
	m.before, m.start = b, time.Now()
	return nil
}

// Stop takes the second sample and returns one row per name (processes of
// one name summed), sorted by name, with ms per op for ops operations.
func (m *Meter) Stop(ctx context.Context, ops int64) ([]Row, error) {
	if m.before == nil {
		return nil, errors.New("cpu: Stop before Start")
	}
	after, err := m.sample(ctx)
	if err != nil {
		return nil, err
	}
	rows := map[string]*Row{}
	row := func(name string) *Row {
		r := rows[name]
		if r == nil {
			r = &Row{Name: name}
			rows[name] = r
		}
		return r
	}
	for p, b := range m.before {
		r := row(p.Name)
		r.PIDs++
		a, ok := after[p]
		if !ok {
			r.Incomplete = true
			continue
		}
		r.Seconds += (a.cpu - b.cpu).Seconds()
		if d := a.switches - b.switches; d > 0 { // a thread that ended takes its count along
			r.Switches += d
		}
	}
	for p, a := range after {
		if _, ok := m.before[p]; !ok { // started during the interval
			r := row(p.Name)
			r.PIDs++
			r.Seconds += a.cpu.Seconds()
			r.Switches += a.switches
		}
	}
	out := make([]Row, 0, len(rows))
	for _, r := range rows {
		if ops > 0 {
			r.MsPerOp = 1000 * r.Seconds / float64(ops)
			r.SwitchesPerOp = float64(r.Switches) / float64(ops)
		}
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Elapsed is the wall time since Start.
func (m *Meter) Elapsed() time.Duration { return time.Since(m.start) }

// LoadAverage is the machine's 1-minute load average (0 when unknown).
func LoadAverage() float64 {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	v, _ := strconv.ParseFloat(f[0], 64)
	return v
}
