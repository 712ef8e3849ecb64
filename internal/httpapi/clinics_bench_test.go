package httpapi_test

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
)

// BenchmarkClinicHold measures POST /appointments through HTTP on a real
// database: "spread" — every hold takes a different open slot (each one a
// win); "one-slot" — every request races for the same slot (one win, the
// rest 409 slot_taken with alternatives, as at a 07:00 opening); "window" —
// every request asks for any slot of one doctor in a month and gets the
// earliest one left (each one a win); "window-full" — every request asks
// for a day whose slots are all taken (409 slot_taken, the common answer
// of a window hold at an opening).
//
//	go test -run '^$' -bench Clinic ./internal/...
func BenchmarkClinicHold(b *testing.B) {
	b.Run("spread", func(b *testing.B) {
		e := startClinics(b, 0)
		clinic := e.seedClinic("UTC")
		doctor := e.seedDoctor(clinic, 5, true, allWeek("00:00", "24:00"))
		days := min(b.N/288+2, 366)
		e.materialize(clinic, bookingtest.Date(1), bookingtest.Date(1+days))
		var ids []string
		rows, err := dbtest.SQL(e.DB).Query(context.Background(),
			`SELECT slot_id::TEXT FROM slots WHERE clinic_id = $1 AND doctor_id = $2 ORDER BY starts_at`, clinic, doctor)
		if err != nil {
			b.Fatal(err)
		}
		for rows.Next() {
			var id string
			_ = rows.Scan(&id)
			ids = append(ids, id)
		}
		rows.Close()
		var next, failed atomic.Int64
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				i := int(next.Add(1) - 1)
				body := map[string]any{"slot_id": ids[i%len(ids)]}
				r, err := e.hold(context.Background(), clinic, fmt.Sprintf("bench-%d", i), body)
				// Past its slots (a very large b.N) a hold finds its slot
				// taken: that answer, and only that one, is still right.
				switch {
				case err != nil:
					failed.Add(1)
				case i < len(ids) && r.Status != http.StatusCreated:
					failed.Add(1)
				case i >= len(ids) && (r.Status != http.StatusConflict || r.Code() != "slot_taken"):
					failed.Add(1)
				}
			}
		})
		b.StopTimer()
		if failed.Load() > 0 {
			b.Fatalf("%d of %d holds answered wrong", failed.Load(), next.Load())
		}
	})
	b.Run("one-slot", func(b *testing.B) {
		e := startClinics(b, 0)
		clinic := e.seedClinic("UTC")
		doctor := e.seedDoctor(clinic, 30, true, allWeek("08:00", "12:00"))
		e.materialize(clinic, bookingtest.Date(3), bookingtest.Date(4))
		target := e.slots(clinic, doctor, bookingtest.Date(3))[4].ID
		var next, won, other atomic.Int64
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				i := next.Add(1)
				r, err := e.hold(context.Background(), clinic, fmt.Sprintf("crowd-%d", i), map[string]any{"slot_id": target})
				switch {
				case err == nil && r.Status == http.StatusCreated:
					won.Add(1)
				case err == nil && r.Status == http.StatusConflict && r.Code() == "slot_taken":
				default:
					other.Add(1)
				}
			}
		})
		b.StopTimer()
		if won.Load() != 1 || other.Load() != 0 {
			b.Fatalf("%d winners and %d unexpected answers", won.Load(), other.Load())
		}
	})
	b.Run("window", func(b *testing.B) {
		e := startClinics(b, 0)
		clinic := e.seedClinic("UTC")
		doctor := e.seedDoctor(clinic, 5, true, allWeek("00:00", "24:00"))
		e.materialize(clinic, bookingtest.Date(1), bookingtest.Date(31))
		first := e.slots(clinic, doctor, bookingtest.Date(1))[0].StartsAt
		body := func() map[string]any {
			return map[string]any{"doctor_id": doctor, "window_start": first.Format(time.RFC3339),
				"window_end": first.AddDate(0, 0, 30).Format(time.RFC3339)}
		}
		var next, failed atomic.Int64
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				i := next.Add(1)
				r, err := e.hold(context.Background(), clinic, fmt.Sprintf("win-%d", i), body())
				// 8,640 slots: past them (a very large b.N) the month is full.
				if err != nil || r.Status != http.StatusCreated && (r.Status != http.StatusConflict || r.Code() != "slot_taken") {
					failed.Add(1)
				}
			}
		})
		b.StopTimer()
		if failed.Load() > 0 {
			b.Fatalf("%d of %d window holds answered wrong", failed.Load(), next.Load())
		}
	})
	b.Run("window-full", func(b *testing.B) {
		e := startClinics(b, 0)
		clinic := e.seedClinic("UTC")
		doctor := e.seedDoctor(clinic, 30, true, allWeek("08:00", "12:00"))
		e.materialize(clinic, bookingtest.Date(3), bookingtest.Date(4))
		slots := e.slots(clinic, doctor, bookingtest.Date(3))
		for i, s := range slots {
			if r, err := e.hold(context.Background(), clinic, fmt.Sprintf("early-%d", i), map[string]any{"slot_id": s.ID}); err != nil || r.Status != http.StatusCreated {
				b.Fatalf("hold slot %d: %v %d %s", i, err, r.Status, r.Body)
			}
		}
		body := func() map[string]any {
			return map[string]any{"doctor_id": doctor, "window_start": slots[0].StartsAt.Format(time.RFC3339),
				"window_end": slots[len(slots)-1].EndsAt.Format(time.RFC3339)}
		}
		var next, other atomic.Int64
		b.ResetTimer()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				i := next.Add(1)
				r, err := e.hold(context.Background(), clinic, fmt.Sprintf("late-%d", i), body())
				if err != nil || r.Status != http.StatusConflict || r.Code() != "slot_taken" {
					other.Add(1)
				}
			}
		})
		b.StopTimer()
		if other.Load() != 0 {
			b.Fatalf("%d unexpected answers", other.Load())
		}
	})
}
