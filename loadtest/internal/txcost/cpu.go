package txcost

import (
	"context"
	"sync"
	"syscall"
	"time"

	"github.com/berthhq/berth/loadtest/internal/cpu"
	"github.com/jackc/pgx/v5"
)

// The rates of one run depend on what else the machine runs; the CPU a
// transaction costs much less. Each leg is also measured in CPU time per
// committed transaction: the PostgreSQL backends serving the scratch
// database plus the client (the Go process for the Go legs, pgbench for
// its own). On a machine the legs saturate, rates are inversely
// proportional to it. Not counted: the server's shared processes
// (WAL writer, checkpointer, autovacuum), which every leg loads alike by the
// WAL it writes.

// backendMeter follows the CPU time of the client backends of one database,
// sampling every 100 ms, so that backends that come and go during a leg
// (pgbench's) are counted up to their last sample.
type backendMeter struct {
	conn  *pgx.Conn
	stop  chan struct{}
	done  chan struct{}
	mu    sync.Mutex
	first map[int32]time.Duration
	last  map[int32]time.Duration
	err   error
}

// meterBackends starts following the backends of conn's database (conn's
// own backend excluded).
func meterBackends(ctx context.Context, conn *pgx.Conn) *backendMeter {
	m := &backendMeter{conn: conn, stop: make(chan struct{}), done: make(chan struct{}),
		first: map[int32]time.Duration{}, last: map[int32]time.Duration{}}
	m.sample(ctx, true)
	go func() { // the only user of conn from here on
		defer close(m.done)
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-m.stop:
				m.sample(ctx, false)
				return
			case <-ctx.Done():
				return
			case <-t.C:
				m.sample(ctx, false)
			}
		}
	}()
	return m
}

func (m *backendMeter) sample(ctx context.Context, initial bool) {
	rows, err := m.conn.Query(ctx, `SELECT pid FROM pg_stat_activity
		WHERE datname = current_database() AND backend_type = 'client backend' AND pid <> pg_backend_pid()`)
	var pids []int32
	if err == nil {
		pids, err = pgx.CollectRows(rows, pgx.RowTo[int32])
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if err != nil {
		if m.err == nil {
			m.err = err
		}
		return
	}
	for _, pid := range pids {
		d, err := cpu.Time(int(pid))
		if err != nil {
			continue // ended meanwhile
		}
		if _, seen := m.first[pid]; !seen {
			if initial {
				m.first[pid] = d
			} else {
				m.first[pid] = 0 // started during the leg: all of it counts
			}
		}
		m.last[pid] = d
	}
}

// Stop ends the sampling and returns the backends' CPU time since the start.
func (m *backendMeter) Stop() (time.Duration, error) {
	close(m.stop)
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	var sum time.Duration
	for pid, d := range m.last {
		sum += d - m.first[pid]
	}
	return sum, m.err
}

// selfCPU is the CPU time this process used so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
