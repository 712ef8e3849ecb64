package engine

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Config shapes one run of the engine.
type Config struct {
	// Rate is arrivals per second. The schedule is fixed in advance:
	// arrival i is due at start + i/Rate whatever the system does. Zero
	// means closed loop: Workers goroutines, each starting the next
	// iteration when the previous one ends (for capacity, not latency).
	Rate float64
	// Duration bounds the schedule; MaxIterations bounds the number of
	// arrivals (0: only Duration). At least one of them must be set.
	Duration      time.Duration
	MaxIterations int64
	// Workers bounds concurrency. An arrival whose worker is not free yet
	// waits in a queue of Queue entries, and its latency still counts from
	// its intended start; an arrival that finds the queue full is dropped
	// and counted (the system is far behind the schedule).
	Workers int
	Queue   int
	// Grace is how long in-flight work may run after the schedule ends
	// before its context is cancelled. Default 30 s.
	Grace time.Duration
	// Progress receives a status line once a second (nil: none).
	Progress io.Writer
	// Status, when set, adds scenario-specific text to the progress line.
	Status func() string
}

// Result is what the engine itself observed.
type Result struct {
	Scheduled  int64         `json:"scheduled"`
	Completed  int64         `json:"completed"`
	Dropped    int64         `json:"dropped"`
	Elapsed    time.Duration `json:"-"`
	ElapsedS   float64       `json:"elapsed_s"`
	ClosedLoop bool          `json:"closed_loop"`
	// MaxStartLagMs is the largest delay between an arrival's intended
	// start and the moment a worker began it.
	MaxStartLagMs float64 `json:"max_start_lag_ms"`
}

// Session is one arrival: a user who may make several requests in a row.
type Session struct {
	Index    int64
	Intended time.Time
	rec      *Recorder
	measured bool
}

// NewSession returns a session due at intended that records into rec
// (for tests and for setup work outside Run).
func NewSession(rec *Recorder, index int64, intended time.Time) *Session {
	return &Session{Index: index, Intended: intended, rec: rec}
}

// Measure runs fn and records its latency under op with the outcome fn
// returns. The first measurement of a session counts from the session's
// intended start, so time spent waiting for a worker is charged to the
// system; later ones (dependent requests of the same user) count from their
// own start.
func (s *Session) Measure(op string, fn func() string) string {
	var outcome string
	s.MeasureAs(func() (string, string) { outcome = fn(); return op, outcome })
	return outcome
}

// MeasureAs is Measure where fn also names the operation once it knows the
// answer (e.g. "hold" for winners, "hold_lost" for losers).
func (s *Session) MeasureAs(fn func() (op, outcome string)) {
	start := time.Now()
	if !s.measured {
		start = s.Intended
		s.measured = true
	}
	op, outcome := fn()
	s.rec.Record(op, time.Since(start), outcome)
}

// Task is the work of one arrival.
type Task func(ctx context.Context, s *Session)

type job struct {
	i        int64
	intended time.Time
}

// Run drives task according to cfg, recording into rec, and returns when
// the schedule is over and in-flight work has finished (or Grace ran out).
func Run(ctx context.Context, cfg Config, rec *Recorder, task Task) Result {
	if cfg.Workers <= 0 {
		cfg.Workers = 64
	}
	if cfg.Grace <= 0 {
		cfg.Grace = 30 * time.Second
	}
	if cfg.Duration <= 0 && cfg.MaxIterations <= 0 {
		cfg.Duration = 10 * time.Second
	}
	if cfg.Duration <= 0 {
		cfg.Duration = 24 * time.Hour // bounded by MaxIterations
	}
	if cfg.Queue <= 0 {
		cfg.Queue = max(cfg.Workers*4, int(cfg.Rate*2), 1024)
	}
	taskCtx, cancelTasks := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelTasks()

	var (
		res              Result
		scheduled, done  atomic.Int64
		maxLagUs         atomic.Int64
		wg               sync.WaitGroup
		start            = time.Now()
		end              = start.Add(cfg.Duration)
		stopProgress     = make(chan struct{})
		progressFinished = make(chan struct{})
	)
	go progress(cfg, rec, start, &scheduled, &done, stopProgress, progressFinished)

	runOne := func(j job) {
		if lag := time.Since(j.intended).Microseconds(); lag > maxLagUs.Load() {
			maxLagUs.Store(lag) // racy max is fine for a report figure
		}
		task(taskCtx, &Session{Index: j.i, Intended: j.intended, rec: rec})
		done.Add(1)
	}

	if cfg.Rate <= 0 {
		res.ClosedLoop = true
		var next atomic.Int64
		for range cfg.Workers {
			wg.Go(func() {
				for ctx.Err() == nil && time.Now().Before(end) {
					i := next.Add(1) - 1
					if cfg.MaxIterations > 0 && i >= cfg.MaxIterations {
						return
					}
					scheduled.Add(1)
					runOne(job{i: i, intended: time.Now()})
				}
			})
		}
	} else {
		jobs := make(chan job, cfg.Queue)
		for range cfg.Workers {
			wg.Go(func() {
				for j := range jobs {
					runOne(j)
				}
			})
		}
		interval := time.Duration(float64(time.Second) / cfg.Rate)
		var i int64
	schedule:
		for {
			now := time.Now()
			// Dispatch every arrival that is due; at high rates several
			// fall into one wake-up.
			for {
				intended := start.Add(time.Duration(i) * interval)
				if !intended.Before(end) || (cfg.MaxIterations > 0 && i >= cfg.MaxIterations) || ctx.Err() != nil {
					break schedule
				}
				if intended.After(now) {
					time.Sleep(min(intended.Sub(now), 50*time.Millisecond))
					break
				}
				scheduled.Add(1)
				select {
				case jobs <- job{i: i, intended: intended}:
				default:
					res.Dropped++
					done.Add(1)
				}
				i++
			}
		}
		close(jobs)
	}

	finished := make(chan struct{})
	go func() { wg.Wait(); close(finished) }()
	select {
	case <-finished:
	case <-time.After(time.Until(end) + cfg.Grace):
		cancelTasks()
		<-finished
	}
	close(stopProgress)
	<-progressFinished
	rec.Tick(time.Now())
	res.Scheduled = scheduled.Load()
	res.Completed = done.Load() - res.Dropped
	// Throughput is completions over the time from the first arrival to the
	// last completion.
	res.Elapsed = time.Since(start)
	res.ElapsedS = res.Elapsed.Seconds()
	res.MaxStartLagMs = float64(maxLagUs.Load()) / 1000
	return res
}

func progress(cfg Config, rec *Recorder, start time.Time, scheduled, done *atomic.Int64, stop, finished chan struct{}) {
	defer close(finished)
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case now := <-t.C:
			sec := rec.Tick(now)
			if cfg.Progress == nil {
				continue
			}
			fmt.Fprintln(cfg.Progress, ProgressLine(now.Sub(start), scheduled.Load(), done.Load(), sec, cfg.Status))
		}
	}
}

// ProgressLine formats the live status line.
func ProgressLine(elapsed time.Duration, scheduled, done int64, sec Second, status func() string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "[%5.0fs] sent %d done %d inflight %d |", elapsed.Seconds(), scheduled, done, scheduled-done)
	names := make([]string, 0, len(sec.Ops))
	for n := range sec.Ops {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		p := sec.Ops[n]
		fmt.Fprintf(&b, " %s %d/s p50 %.1fms p99 %.1fms", n, p.Count, p.P50Ms, p.P99Ms)
		if len(p.Outcomes) > 0 {
			keys := make([]string, 0, len(p.Outcomes))
			for k := range p.Outcomes {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			parts := make([]string, 0, len(keys))
			for _, k := range keys {
				parts = append(parts, fmt.Sprintf("%s=%d", k, p.Outcomes[k]))
			}
			fmt.Fprintf(&b, " [%s]", strings.Join(parts, " "))
		}
		b.WriteString(";")
	}
	if status != nil {
		b.WriteString(" ")
		b.WriteString(status())
	}
	return b.String()
}
