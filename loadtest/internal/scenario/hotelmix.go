package scenario

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/url"

	"github.com/berthhq/berth/loadtest/internal/audit"
	"github.com/berthhq/berth/loadtest/internal/client"
	"github.com/berthhq/berth/loadtest/internal/engine"
	"github.com/berthhq/berth/loadtest/internal/report"
	"github.com/google/uuid"
)

// HotelMix is the funnel of real traffic across many hotels.
type HotelMix struct {
	Hotels        int
	RoomTypes     int
	Rooms         int
	Window        int     // nights loaded, from day 7
	ReadsPerWrite float64 // 100 by default
	ConfirmRatio  float64 // share of holds confirmed; the rest are abandoned
	Load          Load
}

// mixer is the traffic of hotel-mix, reused by soak and region-move.
type mixer struct {
	e             *Env
	hotels        []Hotel
	window        int
	readsPerWrite float64
	confirm       float64
	search        bool
	ledger        *audit.Ledger
}

func (e *Env) newMixer(ctx context.Context, hotels []Hotel, window int, readsPerWrite, confirm float64, ledger *audit.Ledger) *mixer {
	m := &mixer{e: e, hotels: hotels, window: window, readsPerWrite: readsPerWrite, confirm: confirm, ledger: ledger}
	for _, h := range hotels {
		ledger.Touch("hotel", h.ID)
	}
	// Search is optional in this build: probe it once.
	resp, err := e.Client.Do(ctx, client.Request{Method: http.MethodGet,
		Path: "/v1/hotels?city=" + url.QueryEscape("munich") + "&check_in=" + day(10) + "&check_out=" + day(11)})
	m.search = err == nil && resp.Status == http.StatusOK
	return m
}

// stay returns a random stay of 1–3 nights inside the window.
func (m *mixer) stay() (string, string) {
	in := 7 + rand.IntN(max(m.window-3, 1))
	return day(in), day(in + 1 + rand.IntN(3))
}

// write is the funnel's write path: hold, then confirm or abandon.
func (m *mixer) write(ctx context.Context, s *engine.Session, region string) {
	h := pick(m.hotels)
	guest := "mix-" + uuid.NewString()[:12]
	tok := m.e.Client.Guest(guest)
	in, out := m.stay()
	var resID, intentID, secret string
	s.Measure("hold", func() string {
		resp, err := m.e.Client.Do(ctx, client.Request{Region: region, Method: http.MethodPost,
			Path: "/v1/hotels/" + h.ID + "/reservations", Token: tok, IdemKey: uuid.NewString(),
			Body: holdBody(guest, pick(h.RoomTypes), in, out, 1)})
		if err == nil && resp.Status == http.StatusCreated {
			var res struct {
				ID      string `json:"reservation_id"`
				Payment struct {
					IntentID     string `json:"intent_id"`
					ClientSecret string `json:"client_secret"`
				} `json:"payment"`
			}
			if resp.Decode(&res) == nil {
				resID, intentID, secret = res.ID, res.Payment.IntentID, res.Payment.ClientSecret
				m.ledger.Add(audit.Created{Kind: "hotel", PartitionID: h.ID, ID: res.ID, Status: "held"}, guest)
			}
		}
		return client.Outcome(resp, err)
	})
	if resID == "" || rand.Float64() >= m.confirm {
		return // sold out, failed, or the guest walks away (the hold lapses)
	}
	// The guest pays the hold's intent with the development provider (its
	// pay endpoint, which `make up` turns on, also sends the signed webhook),
	// then confirms with the intent id: a verified payment.
	s.Measure("pay", func() string {
		resp, err := m.e.Client.Do(ctx, client.Request{Region: region, Method: http.MethodPost,
			Path: "/v1/dev/payments/" + url.PathEscape(intentID) + "/pay", Body: map[string]any{"client_secret": secret}})
		return client.Outcome(resp, err)
	})
	s.Measure("confirm", func() string {
		resp, err := m.e.Client.Do(ctx, client.Request{Region: region, Method: http.MethodPost,
			Path:  "/v1/hotels/" + h.ID + "/reservations/" + resID + "/confirm",
			Token: tok, IdemKey: uuid.NewString(), Body: map[string]any{"payment_ref": intentID}})
		if err == nil && resp.Status == http.StatusOK {
			m.ledger.SetStatus("hotel", h.ID, resID, "confirmed")
		}
		return client.Outcome(resp, err)
	})
}

// read is one search or availability query, served in the entry region.
func (m *mixer) read(ctx context.Context, s *engine.Session, region string) {
	in, out := m.stay()
	if m.search && rand.IntN(4) == 0 {
		c := cities[rand.IntN(len(cities))]
		s.Measure("search", func() string {
			resp, err := m.e.Client.Do(ctx, client.Request{Region: region, Method: http.MethodGet,
				Path: "/v1/hotels?city=" + url.QueryEscape(c.city) + "&check_in=" + in + "&check_out=" + out})
			return client.Outcome(resp, err)
		})
		return
	}
	h := pick(m.hotels)
	s.Measure("availability", func() string {
		resp, err := m.e.Client.Do(ctx, client.Request{Region: region, Method: http.MethodGet,
			Path: "/v1/hotels/" + h.ID + "/availability?check_in=" + in + "&check_out=" + out})
		return client.Outcome(resp, err)
	})
}

// task is one arrival: a read with probability reads/(reads+1), else the
// write funnel; the entry region is random (the nearest one of a random
// client).
func (m *mixer) task(ctx context.Context, s *engine.Session) {
	region := pick(m.e.Client.Targets.Regions)
	if rand.Float64()*(m.readsPerWrite+1) < m.readsPerWrite {
		m.read(ctx, s, region)
		return
	}
	m.write(ctx, s, region)
}

// RunHotelMix seeds many hotels over every region and drives the funnel.
func (e *Env) RunHotelMix(ctx context.Context, o HotelMix) (*report.Report, error) {
	cfg := o.Load.config()
	cfg["hotels"], cfg["room_types"], cfg["rooms"], cfg["window_nights"] = o.Hotels, o.RoomTypes, o.Rooms, o.Window
	cfg["reads_per_write"], cfg["confirm_ratio"] = o.ReadsPerWrite, o.ConfirmRatio
	r := e.newReport("hotel-mix", cfg)
	e.logf("hotel-mix: creating %d hotel(s) over %v …", o.Hotels, e.Client.Targets.Regions)
	hotels, err := e.CreateHotels(ctx, o.Hotels, o.RoomTypes, o.Rooms, day(7), day(7+o.Window))
	if err != nil {
		return nil, fmt.Errorf("seed: %w", err)
	}
	ledger := audit.NewLedger()
	m := e.newMixer(ctx, hotels, o.Window, o.ReadsPerWrite, o.ConfirmRatio, ledger)
	if !m.search {
		r.Notes = append(r.Notes, "search (GET /v1/hotels?city=…) not served by this build: reads are availability only")
	}
	e.drive(ctx, r, o.Load, engine.NewRecorder(), nil, m.task)
	e.finish(ctx, r, ledger)
	return r, nil
}
