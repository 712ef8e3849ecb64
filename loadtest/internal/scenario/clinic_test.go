package scenario

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/httpapi"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/loadtest/internal/report"
)

// A small clinic opening against a real booking server on a fresh
// database, both patient models in one run: the window patients fill every
// slot (each doctor has more patients than slots), the shipped ones no
// more than there are, and the audit passes for both clinics.
func TestClinicOpeningEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	e := startEnvWith(t, bookingtest.Options{Configure: func(cfg *httpapi.Config, st *postgres.Store) {
		cfg.Clinics = postgres.NewClinicStore(st, 0)
	}})
	r, err := e.RunClinicOpening(context.Background(), ClinicOpening{Doctors: 3, Patients: 150, Load: Load{Rate: 300, Workers: 32}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Figures["slots"] != 72 {
		t.Fatalf("slots %v, want 3 doctors × 24", r.Figures["slots"])
	}
	if r.Figures["window_booked"] != 72 || r.Figures["fill_ratio"] != 1 {
		t.Errorf("window patients booked %v (fill %v), want all 72", r.Figures["window_booked"], r.Figures["fill_ratio"])
	}
	if b := r.Figures["shipped_booked"]; b < 3 || b > 72 {
		t.Errorf("shipped patients booked %v, want between the first hour's 3 and 72", b)
	}
	if r.Ops["hold"].Count == 0 || r.Ops["shipped:hold"].Count == 0 {
		t.Errorf("ops %v: want hold (window patients) and shipped:hold", r.OpNames())
	}
	audited := false
	for _, c := range r.Checks {
		if !c.OK && !c.Skipped {
			t.Errorf("check %s failed: %s", c.Name, c.Detail)
		}
		if c.Name == "every 201 appointment exists exactly once" && !c.Skipped {
			audited = true
		}
	}
	if !audited {
		t.Errorf("no appointment audit ran: %+v", r.Checks)
	}
}

// With --connected the patients' connections are open before the day opens
// (the booking page's reads of the first doctor's slots, up to the
// workers) and their holds re-use them: the opening dials none.
func TestClinicOpeningConnectedPatientsReuseThePageConnections(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	e := startEnvWith(t, bookingtest.Options{Configure: func(cfg *httpapi.Config, st *postgres.Store) {
		cfg.Clinics = postgres.NewClinicStore(st, 0)
	}})
	r, err := e.RunClinicOpening(context.Background(), ClinicOpening{Doctors: 2, Patients: 60, Models: []string{"window"},
		Connected: true, Load: Load{Rate: 300, Workers: 8}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Figures["window_page_ms"]; !ok {
		t.Errorf("no window_page_ms figure: %v", r.Figures)
	}
	if got := r.Figures["window_dials"]; got != 0 {
		t.Errorf("the opening dialled %v connection(s), want 0: the page's were open", got)
	}
	if r.Figures["window_booked"] != 48 {
		t.Errorf("booked %v, want all 48 slots", r.Figures["window_booked"])
	}
	checksPass(t, r)
}

// A patient joins the waiting room only when a hold says so (428
// waiting_room, API.md), then asks again with the access token. In front of
// a real booking server, a proxy counts the requests and, in the second
// run, plays an active waiting room: holds without its access token get
// 428, tickets are issued and admitted at once. Without a room the opening
// sends nothing but holds (before, every patient first asked for a ticket:
// a 404 per patient); with one, every patient is refused once, joins once,
// and the opening still fills every slot.
func TestClinicOpeningPatientsJoinTheWaitingRoomWhenAHoldSaysSo(t *testing.T) {
	if testing.Short() {
		t.Skip("end to end")
	}
	for _, room := range []bool{false, true} {
		t.Run(map[bool]string{false: "no room", true: "room"}[room], func(t *testing.T) {
			var holds, gated, tickets, polls, other atomic.Int64
			front := func(booking http.Handler) http.Handler {
				return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					path := r.URL.Path
					switch {
					case r.Method == http.MethodPost && strings.HasSuffix(path, "/appointments"):
						if room && r.Header.Get("Berth-Access-Token") != "admitted" {
							gated.Add(1)
							w.Header().Set("Content-Type", "application/problem+json")
							w.WriteHeader(http.StatusPreconditionRequired)
							_, _ = w.Write([]byte(`{"status":428,"code":"waiting_room","detail":"join the waiting room"}`))
							return
						}
						holds.Add(1)
					case strings.Contains(path, "/waiting-room/tickets"):
						if !room {
							other.Add(1) // the booking server answers it 404
							break
						}
						w.Header().Set("Content-Type", "application/json")
						if r.Method == http.MethodPost {
							tickets.Add(1)
							w.WriteHeader(http.StatusCreated)
							_, _ = w.Write([]byte(`{"ticket":"t","position":1,"estimated_wait_seconds":0}`))
						} else {
							polls.Add(1)
							_, _ = w.Write([]byte(`{"position":1,"admitted":true,"access_token":"admitted"}`))
						}
						return
					}
					booking.ServeHTTP(w, r)
				})
			}
			e := startEnvFront(t, bookingtest.Options{Configure: func(cfg *httpapi.Config, st *postgres.Store) {
				cfg.Clinics = postgres.NewClinicStore(st, 0)
			}}, front)
			const patients = 60
			r, err := e.RunClinicOpening(context.Background(), ClinicOpening{Doctors: 2, Patients: patients, Models: []string{"window"},
				Load: Load{Rate: 300, Workers: 8}})
			if err != nil {
				t.Fatal(err)
			}
			checksPass(t, r)
			if r.Figures["window_booked"] != 48 {
				t.Errorf("booked %v, want all 48 slots", r.Figures["window_booked"])
			}
			st := r.Ops["hold"]
			if holds.Load()+gated.Load() != st.Count {
				t.Errorf("the server saw %d holds and %d refused by the room, the report %d", holds.Load(), gated.Load(), st.Count)
			}
			if other.Load() != 0 {
				t.Errorf("%d waiting-room request(s) to a clinic without one", other.Load())
			}
			want := int64(0)
			if room {
				want = patients
			}
			if holds.Load() != patients || gated.Load() != want || tickets.Load() != want || polls.Load() != want {
				t.Errorf("holds %d, refused by the room %d, tickets %d, polls %d; want %d, %d, %d, %d",
					holds.Load(), gated.Load(), tickets.Load(), polls.Load(), patients, want, want, want)
			}
			if got := st.Outcomes["waiting_room"]; got != want {
				t.Errorf("outcomes %v: want %d waiting_room", st.Outcomes, want)
			}
			if rate := report.ErrorRate(st); rate != 0 {
				t.Errorf("error rate %v: a 428 before joining is the contract, not an error", rate)
			}
		})
	}
}
