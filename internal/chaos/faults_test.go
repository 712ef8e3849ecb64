package chaos

import (
	"context"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/berthhq/berth/internal/dbtest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// fault is one injected failure. inject starts it; heal ends it and
// returns what happened (a note for the report). A fault that is over when
// inject returns (a restart) has a nil heal.
type fault struct {
	Name, Target, What string
	inject             func(ctx context.Context) error
	heal               func(ctx context.Context) (string, error)
	// holdFor overrides how long the fault lasts (0 = the mode's default).
	holdFor time.Duration
}

// toxicFault is a Toxiproxy toxic on every proxy of a dependency.
func toxicFault(s *stack, name, target, what string, proxyNames []string, typ, stream, attrs string) fault {
	return fault{Name: name, Target: target, What: what,
		inject: func(context.Context) error {
			for _, p := range proxyNames {
				if err := s.prox.toxic(p, typ, stream, attrs); err != nil {
					return err
				}
			}
			return nil
		},
		heal: func(context.Context) (string, error) { s.prox.heal(proxyNames...); return "", nil },
	}
}

// faults lists every fault in the order they are injected.
func (s *stack) faults(long bool) []fault {
	pg, natsP, redisP := s.pgProxies, []string{"nats"}, []string{"redis"}
	latency := `{"latency":300,"jitter":100}`
	if long {
		latency = `{"latency":800,"jitter":400}`
	}
	fs := []fault{
		toxicFault(s, "pg-latency", "postgresql", "latency on every PostgreSQL connection (replies)", pg, "latency", "downstream", latency),
		toxicFault(s, "pg-reset", "postgresql", "TCP reset of every PostgreSQL connection as soon as it sends", pg, "reset_peer", "upstream", `{"timeout":0}`),
		toxicFault(s, "pg-timeout", "postgresql", "PostgreSQL connections black-holed, closed after 2 s", pg, "timeout", "upstream", `{"timeout":2000}`),
		toxicFault(s, "nats-latency", "nats", "latency on every NATS connection", natsP, "latency", "downstream", latency),
		toxicFault(s, "nats-reset", "nats", "TCP reset of every NATS connection as soon as it sends", natsP, "reset_peer", "upstream", `{"timeout":0}`),
		toxicFault(s, "nats-timeout", "nats", "NATS connections black-holed, closed after 2 s", natsP, "timeout", "upstream", `{"timeout":2000}`),
		toxicFault(s, "redis-latency", "redis", "latency on every Redis connection", redisP, "latency", "downstream", latency),
		toxicFault(s, "redis-reset", "redis", "TCP reset of every Redis connection as soon as it sends", redisP, "reset_peer", "upstream", `{"timeout":0}`),
		toxicFault(s, "redis-timeout", "redis", "Redis connections black-holed, closed after 2 s", redisP, "timeout", "upstream", `{"timeout":2000}`),
		{Name: "kill-booking", Target: "booking us-east", What: "kill -9 of the us-east booking service, restarted after the fault",
			inject: func(context.Context) error { s.booking["us-east"].kill(); return nil },
			heal:   func(context.Context) (string, error) { return "", s.booking["us-east"].start() },
		},
		s.relayKillFault(),
		s.walkKillFault(),
		{Name: "pg-restart", Target: "postgresql", What: "pg_ctl restart -m immediate (crash, recovery, restart)",
			inject: func(context.Context) error { return s.pg.restart() },
		},
		{Name: "nats-restart", Target: "nats", What: "NATS server shut down and started again on the same port and store",
			inject: func(context.Context) error { s.nats.stop(); return nil },
			heal:   func(context.Context) (string, error) { return "", s.nats.start() },
		},
		{Name: "redis-flush", Target: "redis", What: "FLUSHALL on the Redis server",
			inject: func(context.Context) error { return redisFlushAll(s.redis) },
		},
	}
	return fs
}

// relayKillFault kills the us-east booking service — the process running
// its outbox relay — after the broker acknowledged a batch and before the
// batch was marked sent. It slows only us-east's database link, so the
// relay's claim transaction stays open for a second or more after the
// publish, and watches for the moment the stream holds more hotel events
// than the outbox has marked sent. It kills when that gap persisted for
// 300 ms — longer than the other region's relay ever keeps one open.
func (s *stack) relayKillFault() fault {
	var caught string
	return fault{Name: "kill-relay", Target: "booking us-east (relay)",
		What: "kill -9 of the us-east booking service between the relay's PubAck and its mark-sent commit",
		inject: func(ctx context.Context) error {
			caught = ""
			if err := s.prox.toxic("pg-us-east", "latency", "downstream", `{"latency":700}`); err != nil {
				return err
			}
			nc, err := nats.Connect("nats://"+s.nats.addr(), nats.Timeout(5*time.Second))
			if err != nil {
				return err
			}
			defer nc.Close()
			js, err := jetstream.New(nc)
			if err != nil {
				return err
			}
			var aheadSince time.Time
			deadline := time.Now().Add(30 * time.Second)
			for time.Now().Before(deadline) && ctx.Err() == nil {
				published, err := streamCount(ctx, js)
				if err != nil {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				var sent int64
				if err := dbtest.SQL(s.db).QueryRow(ctx, `SELECT count(*) FROM outbox WHERE kind = 'hotel' AND sent_at IS NOT NULL`).Scan(&sent); err != nil {
					time.Sleep(50 * time.Millisecond)
					continue
				}
				if published > sent {
					if aheadSince.IsZero() {
						aheadSince = time.Now()
					} else if time.Since(aheadSince) >= 300*time.Millisecond {
						s.booking["us-east"].kill()
						caught = fmt.Sprintf("killed with %d event(s) acknowledged by the broker but not marked sent", published-sent)
						return nil
					}
				} else {
					aheadSince = time.Time{}
				}
				time.Sleep(20 * time.Millisecond)
			}
			s.booking["us-east"].kill()
			caught = "window not caught within 30 s: killed at an arbitrary point of the relay loop"
			return nil
		},
		heal: func(context.Context) (string, error) {
			s.prox.heal("pg-us-east")
			return caught, s.booking["us-east"].start()
		},
	}
}

// streamCount returns how many hotel events the stream holds.
func streamCount(ctx context.Context, js jetstream.JetStream) (int64, error) {
	return subjectCount(ctx, js, "berth.hotel.>")
}

// subjectCount returns how many messages of the stream match filter.
func subjectCount(ctx context.Context, js jetstream.JetStream, filter string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	st, err := js.Stream(ctx, "BERTH_EVENTS")
	if err != nil {
		return 0, err
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return 0, err
	}
	var n uint64
	for _, c := range info.State.Subjects {
		n += c
	}
	return int64(n), nil
}

// redisFlushAll sends FLUSHALL straight to the server (not the proxy).
func redisFlushAll(addr string) error {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("*1\r\n$8\r\nFLUSHALL\r\n")); err != nil {
		return err
	}
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil {
		return err
	}
	if !strings.HasPrefix(string(buf[:n]), "+OK") {
		return fmt.Errorf("FLUSHALL: %q", buf[:n])
	}
	return nil
}

// redisKeys returns the number of keys in Redis db 0 (is anything cached?).
func redisKeys(addr string) (int, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("*1\r\n$6\r\nDBSIZE\r\n")); err != nil {
		return 0, err
	}
	buf := make([]byte, 64)
	n, err := c.Read(buf)
	if err != nil {
		return 0, err
	}
	var k int
	if _, err := fmt.Sscanf(string(buf[:n]), ":%d", &k); err != nil {
		return 0, fmt.Errorf("DBSIZE: %q", buf[:n])
	}
	return k, nil
}
