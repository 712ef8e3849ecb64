package scenario

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/berthhq/berth/loadtest/internal/audit"
	"github.com/berthhq/berth/loadtest/internal/client"
	"github.com/berthhq/berth/loadtest/internal/engine"
	"github.com/berthhq/berth/loadtest/internal/report"
	"github.com/google/uuid"
)

// ClinicOpening is the 07:00 spike: many patients, many doctors, the
// waiting room when the clinic has one.
type ClinicOpening struct {
	Doctors  int
	Patients int
	Region   string
	Load     Load
}

type slot struct {
	ID     string `json:"slot_id"`
	Status string `json:"status"`
}

// RunClinicOpening creates a clinic with doctors and a day of slots, then
// lets every patient grab a slot (most want the earliest), retrying once on
// an alternative; the audit proves no slot has two live appointments.
func (e *Env) RunClinicOpening(ctx context.Context, o ClinicOpening) (*report.Report, error) {
	cfg := o.Load.config()
	cfg["doctors"], cfg["patients"] = o.Doctors, o.Patients
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
	r := e.newReport("clinic-opening", cfg)
	var cl struct {
		ID string `json:"clinic_id"`
	}
	if err := resp.Decode(&cl); err != nil {
		return nil, err
	}
	date := time.Now().UTC().AddDate(0, 0, 14)
	weekday := int(date.Weekday())
	if weekday == 0 {
		weekday = 7
	}
	var doctors []string
	slots := map[string][]slot{}
	for i := range o.Doctors {
		resp, err := e.Client.Do(ctx, client.Request{Region: o.Region, Method: http.MethodPost, Path: "/v1/clinics/" + cl.ID + "/doctors",
			Token: e.Client.Admin(), Body: map[string]any{"name": fmt.Sprintf("Dr %d", i), "slot_minutes": 20, "prepay_required": false,
				"weekly": []map[string]any{{"weekday": weekday, "start": "07:00", "end": "15:00"}}}})
		if err := expect(resp, err, http.StatusCreated, "create doctor"); err != nil {
			return nil, err
		}
		var d struct {
			ID string `json:"doctor_id"`
		}
		if err := resp.Decode(&d); err != nil {
			return nil, err
		}
		doctors = append(doctors, d.ID)
	}
	resp, err = e.Client.Do(ctx, client.Request{Region: o.Region, Method: http.MethodPost, Path: "/v1/clinics/" + cl.ID + "/slots/materialize",
		Token: e.Client.Admin(), Body: map[string]any{"from": date.Format(time.DateOnly), "to": date.AddDate(0, 0, 1).Format(time.DateOnly)}})
	if err := expect(resp, err, http.StatusOK, "materialize"); err != nil {
		return nil, err
	}
	total := 0
	for _, d := range doctors {
		resp, err := e.Client.Do(ctx, client.Request{Region: o.Region, Method: http.MethodGet,
			Path: "/v1/clinics/" + cl.ID + "/doctors/" + d + "/slots?date=" + date.Format(time.DateOnly)})
		if err := expect(resp, err, http.StatusOK, "list slots"); err != nil {
			return nil, err
		}
		var page struct {
			Slots []slot `json:"slots"`
		}
		if err := resp.Decode(&page); err != nil {
			return nil, err
		}
		slots[d] = page.Slots
		total += len(page.Slots)
	}
	e.logf("clinic-opening: clinic %s, %d doctors, %d slots on %s, %d patients", cl.ID, len(doctors), total, date.Format(time.DateOnly), o.Patients)
	ledger := audit.NewLedger()
	ledger.Touch("clinic", cl.ID)
	rec := engine.NewRecorder()
	var booked atomic.Int64
	o.Load.MaxIterations = int64(o.Patients)
	if o.Load.Duration == 0 {
		o.Load.Duration = 2 * time.Minute
	}
	regions := e.Client.Targets.Regions
	e.drive(ctx, r, o.Load, rec, func() string { return fmt.Sprintf("booked %d/%d", booked.Load(), total) },
		func(ctx context.Context, s *engine.Session) {
			guest := "pat-" + uuid.NewString()[:12]
			tok := e.Client.Guest(guest)
			region := regions[int(s.Index)%len(regions)]
			hdr := map[string]string{}
			// The waiting room, when the clinic has one: a ticket, then
			// poll (bounded) until admitted.
			var ticket struct {
				Ticket string `json:"ticket"`
			}
			tr, err := e.Client.Do(ctx, client.Request{Region: region, Method: http.MethodPost, Path: "/v1/clinics/" + cl.ID + "/waiting-room/tickets", Token: tok})
			if err == nil && tr.Status == http.StatusCreated && tr.Decode(&ticket) == nil {
				s.Measure("waiting_room", func() string {
					for range 600 {
						pr, err := e.Client.Do(ctx, client.Request{Region: region, Method: http.MethodGet,
							Path: "/v1/clinics/" + cl.ID + "/waiting-room/tickets/" + ticket.Ticket, Token: tok})
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
			}
			d := doctors[int(s.Index)%len(doctors)]
			ss := slots[d]
			// Most patients want the first hour.
			want := ss[min(len(ss)-1, int(s.Index/int64(len(doctors)))%max(1, min(3, len(ss))))]
			for attempt := range 2 {
				var next string
				s.Measure("hold", func() string {
					resp, err := e.Client.Do(ctx, client.Request{Region: region, Method: http.MethodPost, Path: "/v1/clinics/" + cl.ID + "/appointments",
						Token: tok, IdemKey: uuid.NewString(), Header: hdr, Body: map[string]any{"guest_id": guest, "slot_id": want.ID, "channel": "app"}})
					if err == nil && resp.Status == http.StatusCreated {
						var a struct {
							ID     string `json:"appointment_id"`
							Status string `json:"status"`
						}
						if resp.Decode(&a) == nil {
							ledger.Add(audit.Created{Kind: "clinic", PartitionID: cl.ID, ID: a.ID, Status: a.Status}, guest)
							booked.Add(1)
						}
					} else if err == nil && resp.Code() == "slot_taken" && attempt == 0 {
						var p struct {
							Alternatives []slot `json:"alternatives"`
						}
						if resp.Decode(&p) == nil && len(p.Alternatives) > 0 {
							next = p.Alternatives[0].ID
						}
					}
					return client.Outcome(resp, err)
				})
				if next == "" {
					break
				}
				want.ID = next
			}
		})
	r.Figures["slots"], r.Figures["booked"] = float64(total), float64(booked.Load())
	r.Checks = append(r.Checks, report.Check{Name: "no more bookings than slots", OK: booked.Load() <= int64(total),
		Detail: fmt.Sprintf("%d appointments for %d slots", booked.Load(), total)})
	e.finish(ctx, r, ledger)
	return r, nil
}
