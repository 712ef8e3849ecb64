package scenario

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/berthhq/berth/loadtest/internal/audit"
	"github.com/berthhq/berth/loadtest/internal/client"
	"github.com/berthhq/berth/loadtest/internal/engine"
	"github.com/berthhq/berth/loadtest/internal/report"
	"github.com/google/uuid"
)

// skipped returns a report that says clearly why the scenario did not run.
func (e *Env) skipped(name string, cfg map[string]any, why string) *report.Report {
	r := e.newReport(name, cfg)
	r.Status = report.StatusSkipped
	r.Notes = append(r.Notes, why)
	return r
}

// absent reports whether an endpoint is not served by this build.
func absent(resp client.Response, err error) bool {
	// The mux answers an unrouted path with a problem whose detail is
	// "no such resource"; a 404 for an unknown partition names it instead.
	return err == nil && (resp.Status == http.StatusMethodNotAllowed ||
		resp.Status == http.StatusNotFound && (resp.Code() != "not_found" || strings.Contains(string(resp.Body), "no such resource")))
}

// RegionMove is steady hotel-mix traffic while partitions move between
// regions every Every.
type RegionMove struct {
	Mix   HotelMix
	Every time.Duration
}

// RunRegionMove moves random hotels to other regions during steady
// bookings; the audit proves nothing was double-written across the move.
func (e *Env) RunRegionMove(ctx context.Context, o RegionMove) (*report.Report, error) {
	cfg := o.Mix.Load.config()
	cfg["hotels"], cfg["move_every"] = o.Mix.Hotels, o.Every.String()
	probe, err := e.Client.Do(ctx, client.Request{Method: http.MethodPost, Path: "/v1/placements/hotel/" + uuid.NewString() + "/move",
		Token: e.Client.Ops(), Body: map[string]any{"to_region": e.Client.Targets.Regions[0]}})
	if absent(probe, err) {
		return e.skipped("region-move", cfg, fmt.Sprintf("POST /v1/placements/{kind}/{id}/move answers %d: partition moves are not served by this build yet", probe.Status)), nil
	}
	r := e.newReport("region-move", cfg)
	hotels, err := e.CreateHotels(ctx, o.Mix.Hotels, o.Mix.RoomTypes, o.Mix.Rooms, day(7), day(7+o.Mix.Window))
	if err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	ledger := audit.NewLedger()
	m := e.newMixer(ctx, hotels, o.Mix.Window, o.Mix.ReadsPerWrite, o.Mix.ConfirmRatio, ledger)
	rec := engine.NewRecorder()
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() { // the mover: bounded by the run's duration
		defer close(done)
		t := time.NewTicker(o.Every)
		defer t.Stop()
		for i := int64(0); ; i++ {
			select {
			case <-stop:
				return
			case <-t.C:
			}
			h := pick(hotels)
			others := slices.DeleteFunc(slices.Clone(e.Client.Targets.Regions), func(s string) bool { return s == h.Region })
			if len(others) == 0 {
				continue
			}
			to := pick(others)
			s := engine.NewSession(rec, i, time.Now())
			s.Measure("move", func() string {
				resp, err := e.Client.Do(ctx, client.Request{Region: pick(e.Client.Targets.Regions), Method: http.MethodPost,
					Path: "/v1/placements/hotel/" + h.ID + "/move", Token: e.Client.Ops(), Body: map[string]any{"to_region": to}})
				return client.Outcome(resp, err)
			})
		}
	}()
	e.drive(ctx, r, o.Mix.Load, rec, nil, m.task)
	close(stop)
	<-done
	r.Ops = rec.Ops(r.Engine.Elapsed)
	e.finish(ctx, r, ledger)
	return r, nil
}

// Soak is hotel-mix for a long time while gauges are sampled for drift.
type Soak struct {
	Mix    HotelMix
	Sample time.Duration
}

// RunSoak drives steady mixed traffic and samples database connections,
// the outbox backlog and table sizes; a backlog that only grows is drift.
func (e *Env) RunSoak(ctx context.Context, o Soak) (*report.Report, error) {
	cfg := o.Mix.Load.config()
	cfg["hotels"], cfg["sample_every"] = o.Mix.Hotels, o.Sample.String()
	r := e.newReport("soak", cfg)
	hotels, err := e.CreateHotels(ctx, o.Mix.Hotels, o.Mix.RoomTypes, o.Mix.Rooms, day(7), day(7+o.Mix.Window))
	if err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	ledger := audit.NewLedger()
	m := e.newMixer(ctx, hotels, o.Mix.Window, o.Mix.ReadsPerWrite, o.Mix.ConfirmRatio, ledger)
	stop, done := make(chan struct{}), make(chan struct{})
	start := time.Now()
	go func() {
		defer close(done)
		t := time.NewTicker(o.Sample)
		defer t.Stop()
		for {
			if s, ok := e.sample(ctx, start); ok {
				r.Samples = append(r.Samples, s)
			}
			select {
			case <-stop:
				return
			case <-t.C:
			}
		}
	}()
	e.drive(ctx, r, o.Mix.Load, engine.NewRecorder(), nil, m.task)
	close(stop)
	<-done
	if s, ok := e.sample(ctx, start); ok {
		r.Samples = append(r.Samples, s)
	}
	r.Checks = append(r.Checks, drift(r.Samples, "outbox_unsent", 1000), drift(r.Samples, "db_connections", 50))
	e.finish(ctx, r, ledger)
	return r, nil
}

func (e *Env) sample(ctx context.Context, start time.Time) (report.Sample, bool) {
	if e.DB == nil {
		return report.Sample{}, false
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s := report.Sample{T: time.Since(start).Seconds(), Values: map[string]float64{}}
	var conns, active int64
	if e.DB.QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE state = 'active') FROM pg_stat_activity WHERE datname = current_database()`).Scan(&conns, &active) == nil {
		s.Values["db_connections"], s.Values["db_active"] = float64(conns), float64(active)
	}
	if unsent, err := e.unsentEvents(ctx); err == nil {
		s.Values["outbox_unsent"] = float64(unsent)
	}
	return s, true
}

// drift fails when a gauge grew by more than slack from the first third of
// the run to the last third (a leak or a backlog that never drains).
func drift(samples []report.Sample, key string, slack float64) report.Check {
	c := report.Check{Name: "no drift: " + key, OK: true}
	var vals []float64
	for _, s := range samples {
		if v, ok := s.Values[key]; ok {
			vals = append(vals, v)
		}
	}
	if len(vals) < 6 {
		c.Skipped, c.Detail = true, fmt.Sprintf("%d samples: too few to judge", len(vals))
		return c
	}
	third := len(vals) / 3
	avg := func(xs []float64) float64 {
		t := 0.0
		for _, x := range xs {
			t += x
		}
		return t / float64(len(xs))
	}
	a, b := avg(vals[:third]), avg(vals[len(vals)-third:])
	c.OK = b-a <= slack
	c.Detail = fmt.Sprintf("mean %.1f in the first third, %.1f in the last (slack %.0f)", a, b, slack)
	return c
}
