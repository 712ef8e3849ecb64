package httpapi_test

import (
	"context"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/jackc/pgx/v5"
)

// sentSQL records the distinct statements sent to the database while on.
type sentSQL struct {
	mu   sync.Mutex
	on   bool
	sent []string
}

func (r *sentSQL) add(sql string) {
	switch strings.ToLower(strings.Fields(sql + " x")[0]) {
	case "begin", "commit", "rollback":
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.on && !slices.Contains(r.sent, sql) {
		r.sent = append(r.sent, sql)
	}
}

func (r *sentSQL) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	r.add(d.SQL)
	return ctx
}
func (r *sentSQL) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (r *sentSQL) TraceBatchStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceBatchStartData) context.Context {
	for _, q := range d.Batch.QueuedQueries {
		r.add(q.SQL)
	}
	return ctx
}
func (r *sentSQL) TraceBatchQuery(context.Context, *pgx.Conn, pgx.TraceBatchQueryData) {}
func (r *sentSQL) TraceBatchEnd(context.Context, *pgx.Conn, pgx.TraceBatchEndData)     {}

func (r *sentSQL) record(f func()) []string {
	r.mu.Lock()
	r.on, r.sent = true, nil
	r.mu.Unlock()
	f()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.on = false
	return r.sent
}

// The warm-up plans what an appointment hold sends (ADR 0025): a named
// slot won, then refused by its transaction and by a read (ADR 0011), a
// replay of the winner's key, a window won, and a window refused by a read
// and by its transaction. A new statement on that path fails this test
// until postgres.AppointmentHoldStatements names it.
func TestWarmCoversTheAppointmentHoldPath(t *testing.T) {
	rec := &sentSQL{}
	e := startClinicsWith(t, 0, bookingtest.Options{DB: postgres.Options{Tracer: rec}})
	clinic := e.seedClinic("Europe/Madrid")
	doctor := e.seedDoctor(clinic, 20, false, allWeek("07:00", "15:00"))
	day := bookingtest.Date(14)
	e.materialize(clinic, day, bookingtest.Date(15))
	slots := e.slots(clinic, doctor, day)
	path := "/v1/clinics/" + clinic + "/appointments"
	hold := func(guest, key string, body map[string]any, want int) {
		t.Helper()
		body["guest_id"] = guest
		if r := e.Do(bookingtest.Request{Method: "POST", Path: path, Token: e.guest(guest), IdemKey: key, Body: body}); r.Status != want {
			t.Fatalf("hold %v: %d %s, want %d", body, r.Status, r.Body, want)
		}
	}
	named := func(i int) map[string]any { return map[string]any{"slot_id": slots[i].ID} }
	inWindow := func(from, to int) map[string]any {
		return map[string]any{"doctor_id": doctor, "window_start": slots[from].StartsAt, "window_end": slots[to].EndsAt}
	}
	sent := rec.record(func() {
		key := bookingtest.NewKey()
		hold("g1", key, named(0), http.StatusCreated)
		hold("g2", bookingtest.NewKey(), named(0), http.StatusConflict) // its transaction refuses it
		hold("g3", bookingtest.NewKey(), named(0), http.StatusConflict) // a read refuses it
		hold("g1", key, named(0), http.StatusCreated)                   // a replay
		hold("g4", bookingtest.NewKey(), inWindow(1, 2), http.StatusCreated)
		hold("g5", bookingtest.NewKey(), inWindow(1, 2), http.StatusCreated)
		hold("g6", bookingtest.NewKey(), inWindow(0, 2), http.StatusConflict) // a full window: its transaction refuses it
		hold("g7", bookingtest.NewKey(), inWindow(0, 2), http.StatusConflict) // and now a read (ADR 0011)
		hold("g4", bookingtest.NewKey(), inWindow(3, 5), http.StatusConflict) // g4 has the doctor that day: its transaction refuses it
	})
	warm := postgres.AppointmentHoldStatements()
	for _, sql := range sent {
		if !slices.Contains(warm, sql) {
			t.Errorf("an appointment hold sent a statement the warm-up does not plan (add it to postgres.AppointmentHoldStatements):\n%s", sql)
		}
	}
	for _, sql := range warm {
		if !slices.Contains(sent, sql) {
			t.Errorf("the warm-up plans a statement these holds never sent (a branch not exercised, or one gone from the path):\n%s", sql)
		}
	}
}
