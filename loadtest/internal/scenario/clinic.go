package scenario

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/berthhq/berth/loadtest/internal/audit"
	"github.com/berthhq/berth/loadtest/internal/client"
	"github.com/berthhq/berth/loadtest/internal/engine"
	"github.com/berthhq/berth/loadtest/internal/report"
	"github.com/google/uuid"
)

// The patient models of the clinic opening. Both want the first hour of
// their doctor's day, take a later slot of the day when it is gone, and
// make at most two holds; they differ in what they ask for.
const (
	// PatientShipped is the model the scenario shipped with: one slot of
	// the first hour, then the first alternative the 409 offers.
	PatientShipped = "shipped"
	// PatientWindow is what a mature client does: one hold of "any open
	// slot of my doctor today"; the server takes the earliest one nobody
	// else is taking (the first hour while it lasts), so patients never
	// collide and nobody needs a second try.
	PatientWindow = "window"
)

// PatientModels are the models, in the order a comparison runs them.
var PatientModels = []string{PatientShipped, PatientWindow}

// ClinicOpening is the 07:00 spike: many patients, many doctors, the
// waiting room when the clinic has one.
type ClinicOpening struct {
	Doctors  int
	Patients int
	Region   string
	Load     Load
	// Models are the patient models to run, each on a fresh clinic of its
	// own with the same doctors, slots and arrivals, in this order; the last
	// one's operations carry the plain names ("hold"), the others' are
	// prefixed with the model ("shipped:hold"), so one report holds the
	// before and the after. Empty: PatientModels.
	Models []string
	// Settle: how long the opening waits, once its clinic's setup has been
	// relayed, before it opens (FlashSale.Settle).
	Settle time.Duration
	// Connected: every patient is on the booking page when the day opens,
	// having loaded the first doctor's slots over a kept-alive connection
	// that its hold then re-uses (FlashSale.Connected).
	Connected bool
}

type slot struct {
	ID       string    `json:"slot_id"`
	Status   string    `json:"status"`
	StartsAt time.Time `json:"starts_at"`
	EndsAt   time.Time `json:"ends_at"`
}

// openedClinic is a clinic with a day of slots, ready for the opening.
type openedClinic struct {
	id      string
	doctors []string
	slots   map[string][]slot // by doctor, ascending start
	total   int
}

// sampleLockWaits samples, every 50 ms until the returned stop is called,
// the database sessions in a transaction and those of them waiting for a
// row or transaction lock (pg_stat_activity, wait event type Lock). stop
// returns the share of lock waits among them: what batching a doctor-day
// could win back, since a batch removes lock queues, not work. Other
// sessions of the same database (a platform's relays) count as not waiting.
func (e *Env) sampleLockWaits(ctx context.Context) (stop func() (float64, bool)) {
	if e.DB == nil {
		return func() (float64, bool) { return 0, false }
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var waiting, busy int64
	go func() {
		defer close(done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			var w, b int64
			if e.DB.QueryRow(ctx, `SELECT count(*) FILTER (WHERE wait_event_type = 'Lock'), count(*) FROM pg_stat_activity
				WHERE datname = current_database() AND pid <> pg_backend_pid() AND backend_type = 'client backend'
				  AND state IN ('active', 'idle in transaction')`).Scan(&w, &b) == nil {
				waiting, busy = waiting+w, busy+b
			}
		}
	}()
	return func() (float64, bool) {
		cancel()
		<-done
		if busy == 0 {
			return 0, false
		}
		return float64(waiting) / float64(busy), true
	}
}

// RunClinicOpening creates, for each patient model, a clinic with doctors
// and a day of slots, then lets every patient try to book with that model;
// the audit proves no slot has two live appointments. Figures: booked and
// fill_ratio of the last model, <model>_booked, <model>_fill_ratio,
// <model>_lock_wait_share and <model>_refused_without_alternatives (409
// slot_taken answers that offered nothing to try) of each, and the ratios
// of the last model to the first.
func (e *Env) RunClinicOpening(ctx context.Context, o ClinicOpening) (*report.Report, error) {
	if len(o.Models) == 0 {
		o.Models = PatientModels
	}
	for _, m := range o.Models {
		if !slices.Contains(PatientModels, m) {
			return nil, fmt.Errorf("patient model %q: want one of %v", m, PatientModels)
		}
	}
	cfg := o.Load.config()
	cfg["doctors"], cfg["patients"], cfg["patient_models"] = o.Doctors, o.Patients, o.Models
	if o.Region == "" {
		o.Region = e.Client.Targets.Regions[0]
	}
	resp, err := e.Client.Do(ctx, client.Request{Region: o.Region, Method: http.MethodPost, Path: "/v1/clinics", Token: e.Client.Admin(),
		Body: map[string]any{"name": "Loadtest Clinic", "timezone": "Europe/Madrid", "home_region": o.Region}})
	if absent(resp, err) || err == nil && resp.Status == http.StatusNotFound {
		return e.skipped("clinic-opening", cfg, fmt.Sprintf("POST /v1/clinics answers %d: clinic endpoints are not served by this build yet", resp.Status)), nil
	}
	if err := expect(resp, err, http.StatusCreated, "create clinic"); err != nil {
		return nil, err
	}
	var first struct {
		ID string `json:"clinic_id"`
	}
	if err := resp.Decode(&first); err != nil {
		return nil, err
	}
	r := e.newReport("clinic-opening", cfg)
	ledger := audit.NewLedger()
	o.Load.MaxIterations = int64(o.Patients)
	if o.Load.Duration == 0 {
		o.Load.Duration = 2 * time.Minute
	}
	date := time.Now().UTC().AddDate(0, 0, 14)
	earlier := map[string]engine.OpStats{} // the operations of every model but the last
	for i, model := range o.Models {
		id := first.ID
		if i > 0 {
			if id, err = e.createClinic(ctx, o.Region); err != nil {
				return nil, err
			}
		}
		cl, err := e.openClinic(ctx, o.Region, id, o.Doctors, date)
		if err != nil {
			return nil, err
		}
		e.logf("clinic-opening: %s patients: clinic %s, %d doctors, %d slots on %s, %d patients",
			model, cl.id, len(cl.doctors), cl.total, date.Format(time.DateOnly), o.Patients)
		ledger.Touch("clinic", cl.id)
		if err := e.openAfterSetup(ctx, r, model+"_", o.Settle, cl.id); err != nil {
			return nil, err
		}
		if o.Connected {
			start := time.Now()
			page := "/v1/clinics/" + cl.id + "/doctors/" + cl.doctors[0] + "/slots?date=" + date.Format(time.DateOnly)
			if err := e.connectClients(ctx, page, o.Patients, o.Load.Workers); err != nil {
				return nil, fmt.Errorf("the booking page: %w", err)
			}
			r.Figures[model+"_page_ms"] = float64(time.Since(start).Microseconds()) / 1000
		}
		dials := e.Client.Dials()
		rec := engine.NewRecorder()
		var booked, bare atomic.Int64
		stopWaits := e.sampleLockWaits(ctx)
		var res engine.Result
		e.accountCPU(ctx, r, e.cpuMeter(e.CPUProcs, e.CPUPostgres), model+"_hold", func() int64 {
			res = e.drive(ctx, r, o.Load, rec, func() string { return fmt.Sprintf("%s: booked %d/%d", model, booked.Load(), cl.total) },
				e.patient(model, cl, ledger, &booked, &bare))
			return res.Completed
		})
		if share, ok := stopWaits(); ok {
			r.Figures[model+"_lock_wait_share"] = share
		}
		r.Figures[model+"_dials"] = float64(e.Client.Dials() - dials)
		r.Figures[model+"_refused_without_alternatives"] = float64(bare.Load())
		n, total := booked.Load(), int64(cl.total)
		r.Figures[model+"_booked"], r.Figures[model+"_fill_ratio"] = float64(n), float64(n)/float64(max(total, 1))
		r.Figures["slots"], r.Figures["booked"], r.Figures["fill_ratio"] = float64(total), float64(n), float64(n)/float64(max(total, 1))
		r.Checks = append(r.Checks, report.Check{Name: model + " patients: no more bookings than slots", OK: n <= total,
			Detail: fmt.Sprintf("%d appointments for %d slots", n, total)})
		if i < len(o.Models)-1 {
			// Only the last model keeps the plain operation names.
			for name, st := range r.Ops {
				earlier[model+":"+name] = st
			}
			r.Notes = append(r.Notes, fmt.Sprintf("%s patients: %d of %d slots booked in %.1f s", model, n, total, res.Elapsed.Seconds()))
		}
	}
	for name, st := range earlier {
		r.Ops[name] = st
	}
	if len(o.Models) > 1 {
		firstModel, last := o.Models[0], o.Models[len(o.Models)-1]
		if b := r.Figures[firstModel+"_booked"]; b > 0 {
			r.Figures["booked_vs_"+firstModel] = r.Figures[last+"_booked"] / b
		}
		if p := r.Ops[firstModel+":hold"].P99Ms; p > 0 {
			r.Figures["hold_p99_vs_"+firstModel] = r.Ops["hold"].P99Ms / p
		}
	}
	e.finish(ctx, r, ledger)
	return r, nil
}

// createClinic creates one more loadtest clinic.
func (e *Env) createClinic(ctx context.Context, region string) (string, error) {
	resp, err := e.Client.Do(ctx, client.Request{Region: region, Method: http.MethodPost, Path: "/v1/clinics", Token: e.Client.Admin(),
		Body: map[string]any{"name": "Loadtest Clinic", "timezone": "Europe/Madrid", "home_region": region}})
	if err := expect(resp, err, http.StatusCreated, "create clinic"); err != nil {
		return "", err
	}
	var cl struct {
		ID string `json:"clinic_id"`
	}
	return cl.ID, resp.Decode(&cl)
}

// openClinic gives a clinic its doctors (07:00–15:00 on date's weekday,
// 20-minute slots: 24 a day), materializes the day and reads its slots.
func (e *Env) openClinic(ctx context.Context, region, clinicID string, doctors int, date time.Time) (openedClinic, error) {
	cl := openedClinic{id: clinicID, slots: map[string][]slot{}}
	weekday := int(date.Weekday())
	if weekday == 0 {
		weekday = 7
	}
	for i := range doctors {
		resp, err := e.Client.Do(ctx, client.Request{Region: region, Method: http.MethodPost, Path: "/v1/clinics/" + clinicID + "/doctors",
			Token: e.Client.Admin(), Body: map[string]any{"name": fmt.Sprintf("Dr %d", i), "slot_minutes": 20, "prepay_required": false,
				"weekly": []map[string]any{{"weekday": weekday, "start": "07:00", "end": "15:00"}}}})
		if err := expect(resp, err, http.StatusCreated, "create doctor"); err != nil {
			return cl, err
		}
		var d struct {
			ID string `json:"doctor_id"`
		}
		if err := resp.Decode(&d); err != nil {
			return cl, err
		}
		cl.doctors = append(cl.doctors, d.ID)
	}
	resp, err := e.Client.Do(ctx, client.Request{Region: region, Method: http.MethodPost, Path: "/v1/clinics/" + clinicID + "/slots/materialize",
		Token: e.Client.Admin(), Body: map[string]any{"from": date.Format(time.DateOnly), "to": date.AddDate(0, 0, 1).Format(time.DateOnly)}})
	if err := expect(resp, err, http.StatusOK, "materialize"); err != nil {
		return cl, err
	}
	for _, d := range cl.doctors {
		resp, err := e.Client.Do(ctx, client.Request{Region: region, Method: http.MethodGet,
			Path: "/v1/clinics/" + clinicID + "/doctors/" + d + "/slots?date=" + date.Format(time.DateOnly)})
		if err := expect(resp, err, http.StatusOK, "list slots"); err != nil {
			return cl, err
		}
		var page struct {
			Slots []slot `json:"slots"`
		}
		if err := resp.Decode(&page); err != nil {
			return cl, err
		}
		if len(page.Slots) == 0 {
			return cl, fmt.Errorf("doctor %s has no slots on %s", d, date.Format(time.DateOnly))
		}
		cl.slots[d] = page.Slots
		cl.total += len(page.Slots)
	}
	return cl, nil
}

// patient is one arrival of the opening with the given model: patient i
// sees doctor i mod doctors and holds as its model says. It joins the
// waiting room only when a hold is refused 428 waiting_room (API.md: the
// clinic's window is active), then asks again with the access token — as
// a client that follows the contract does, so a clinic without a waiting
// room gets no request but the patient's holds.
func (e *Env) patient(model string, cl openedClinic, ledger *audit.Ledger, booked, bare *atomic.Int64) engine.Task {
	regions := e.Client.Targets.Regions
	return func(ctx context.Context, s *engine.Session) {
		guest := "pat-" + uuid.NewString()[:12]
		tok := e.Client.Guest(guest)
		region := regions[int(s.Index)%len(regions)]
		var hdr map[string]string // the waiting room's access token, once admitted
		d := cl.doctors[int(s.Index)%len(cl.doctors)]
		ss := cl.slots[d]
		// ask makes one hold request and says what came back: whether it
		// booked, the alternatives of a 409 slot_taken, and whether the
		// waiting room refused it (428 waiting_room).
		ask := func(body map[string]any) (alternatives []slot, gated bool) {
			body["guest_id"], body["channel"] = guest, "app"
			s.Measure("hold", func() string {
				resp, err := e.Client.Do(ctx, client.Request{Region: region, Method: http.MethodPost, Path: "/v1/clinics/" + cl.id + "/appointments",
					Token: tok, IdemKey: uuid.NewString(), Header: hdr, Body: body})
				if err == nil && resp.Status == http.StatusCreated {
					var a struct {
						ID     string `json:"appointment_id"`
						Status string `json:"status"`
					}
					if resp.Decode(&a) == nil {
						ledger.Add(audit.Created{Kind: "clinic", PartitionID: cl.id, ID: a.ID, Status: a.Status}, guest)
						booked.Add(1)
					}
				} else if err == nil && resp.Code() == "slot_taken" {
					var p struct {
						Alternatives []slot `json:"alternatives"`
					}
					if resp.Decode(&p) == nil {
						alternatives = p.Alternatives
					}
					if alternatives == nil {
						alternatives = []slot{}
					}
					if len(alternatives) == 0 {
						bare.Add(1)
					}
				}
				gated = err == nil && resp.Status == http.StatusPreconditionRequired && resp.Code() == "waiting_room"
				return client.Outcome(resp, err)
			})
			return alternatives, gated
		}
		// hold asks; the first 428 waiting_room sends the patient through
		// the waiting room, and the same hold is asked again once admitted.
		hold := func(body map[string]any) []slot {
			alternatives, gated := ask(body)
			if gated && hdr == nil {
				hdr = e.admitted(ctx, s, region, cl.id, tok)
				alternatives, _ = ask(body)
			}
			return alternatives
		}
		switch model {
		case PatientShipped:
			// Most patients want the first hour: one of its three slots.
			want := ss[min(len(ss)-1, int(s.Index/int64(len(cl.doctors)))%max(1, min(3, len(ss))))]
			if alts := hold(map[string]any{"slot_id": want.ID}); len(alts) > 0 {
				hold(map[string]any{"slot_id": alts[0].ID})
			}
		case PatientWindow:
			hold(map[string]any{"doctor_id": d, "window_start": ss[0].StartsAt.Format(time.RFC3339),
				"window_end": ss[len(ss)-1].EndsAt.Format(time.RFC3339)})
		}
	}
}

// admitted takes the clinic's waiting room: a ticket, then a bounded poll
// until admitted. It returns the headers a hold then needs (none when the
// room gave no ticket or no admission: the hold is asked again without).
func (e *Env) admitted(ctx context.Context, s *engine.Session, region, clinicID, tok string) map[string]string {
	hdr := map[string]string{}
	var ticket struct {
		Ticket string `json:"ticket"`
	}
	tr, err := e.Client.Do(ctx, client.Request{Region: region, Method: http.MethodPost, Path: "/v1/clinics/" + clinicID + "/waiting-room/tickets", Token: tok})
	if err != nil || tr.Status != http.StatusCreated || tr.Decode(&ticket) != nil {
		return hdr
	}
	s.Measure("waiting_room", func() string {
		for range 600 {
			pr, err := e.Client.Do(ctx, client.Request{Region: region, Method: http.MethodGet,
				Path: "/v1/clinics/" + clinicID + "/waiting-room/tickets/" + ticket.Ticket, Token: tok})
			var st struct {
				Admitted    bool   `json:"admitted"`
				AccessToken string `json:"access_token"`
			}
			if err != nil || pr.Status != http.StatusOK || pr.Decode(&st) != nil {
				return client.Outcome(pr, err)
			}
			if st.Admitted {
				hdr["Berth-Access-Token"] = st.AccessToken
				return "ok"
			}
			time.Sleep(500 * time.Millisecond)
		}
		return "not_admitted"
	})
	return hdr
}
