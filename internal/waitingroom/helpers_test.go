package waitingroom_test

import (
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/ratelimit"
	"github.com/berthhq/berth/internal/rediscache/redistest"
	"github.com/berthhq/berth/internal/waitingroom"
	"github.com/redis/go-redis/v9"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// Test keys: k2 is the newest (signs), k1 an older one still verifying.
const (
	key1 = "k1:" + "0101010101010101010101010101010101010101010101010101010101010101"
	key2 = "k2:" + "0202020202020202020202020202020202020202020202020202020202020202"
)

// clock is a settable clock shared by a room, its gate and the test.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time  { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Set(t time.Time) { c.mu.Lock(); c.t = t; c.mu.Unlock() }

// madrid is the clinics' time zone in these tests.
var madrid = mustLoc("Europe/Madrid")

func mustLoc(name string) *time.Location {
	l, err := time.LoadLocation(name)
	if err != nil {
		panic(err)
	}
	return l
}

// at is a local Madrid time on 2027-01-(day).
func at(day, hh, mm, ss int) time.Time { return time.Date(2027, 1, day, hh, mm, ss, 0, madrid) }

func windows(t testing.TB, json string) map[string]waitingroom.Window {
	t.Helper()
	w, err := waitingroom.ParseWindows(waitingroom.WindowsEnvVar, json)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

func keyring(t testing.TB, spec ...string) *waitingroom.Keyring {
	t.Helper()
	kr, err := waitingroom.ParseKeys(waitingroom.KeysEnvVar, strings.Join(spec, ","))
	if err != nil {
		t.Fatal(err)
	}
	return kr
}

// redisClient starts a redis-server for the test and returns a client on it.
func redisClient(t testing.TB) (*redistest.Server, *redis.Client) {
	t.Helper()
	srv := redistest.Start(t)
	rdb, err := ratelimit.NewClient(srv.URL(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	return srv, rdb
}

// morning is the window of clinic c1: arrivals from 06:55, opening at
// 07:00, admitting 2 per second, until 07:30 Madrid time.
const morning = `[{"clinic_id":"c1","timezone":"Europe/Madrid","start":"06:55","opens_at":"07:00","end":"07:30","admit_per_second":2},
 {"clinic_id":"c2","timezone":"Europe/Madrid","start":"06:55","opens_at":"07:00","end":"07:30","admit_per_second":2}]`
