package waitingroom_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/httpapi"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/ratelimit"
	"github.com/berthhq/berth/internal/waitingroom"
)

// lateGate lets the booking server start before the clinic (and so the
// window keyed by its id) exists.
type lateGate struct {
	g atomic.Pointer[waitingroom.Gate]
}

func (l *lateGate) Check(r *http.Request, clinicID, subject string) error {
	if g := l.g.Load(); g != nil {
		return g.Check(r, clinicID, subject)
	}
	return nil
}

// TestAdmittedBookOthersGet428 is the end of the must-show: a real booking
// server (PostgreSQL, the clinic routes, the waiting-room hook in the hold
// path) and a real room (Redis). 30 patients take tickets before 07:00; at
// 07:00:05, admitting 2 per second, positions 1–10 are admitted: they book
// with their access tokens, the other 20 get 428 waiting_room (with no
// token, or with a forged one), and after the window everyone may book.
func TestAdmittedBookOthersGet428(t *testing.T) {
	_, rdb := redisClient(t)
	gate := &lateGate{}
	env := bookingtest.Start(t, bookingtest.Options{Configure: func(cfg *httpapi.Config, st *postgres.Store) {
		cfg.Clinics = postgres.NewClinicStore(st, 10*time.Minute)
		cfg.WaitingRoom = gate
	}})
	admin := env.Admin()
	mustDo := func(req bookingtest.Request, want int) bookingtest.Response {
		t.Helper()
		r := env.Do(req)
		if r.Status != want {
			t.Fatalf("%s %s: %d %s, want %d", req.Method, req.Path, r.Status, r.Body, want)
		}
		return r
	}
	clinicID := mustDo(bookingtest.Request{Method: "POST", Path: "/v1/clinics", Token: admin,
		Body: map[string]any{"name": "Opening Clinic", "timezone": "Europe/Madrid", "home_region": "us-east"}}, 201).JSON()["clinic_id"].(string)
	var weekly []map[string]any
	for d := 1; d <= 7; d++ {
		weekly = append(weekly, map[string]any{"weekday": d, "start": "08:00", "end": "18:00"})
	}
	doctorID := mustDo(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinicID + "/doctors", Token: admin,
		Body: map[string]any{"name": "Dr. Open", "slot_minutes": 15, "prepay_required": false, "weekly": weekly}}, 201).JSON()["doctor_id"].(string)
	day := time.Now().AddDate(0, 0, 2).Format(time.DateOnly) // real dates: the database's now() judges holds
	mustDo(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinicID + "/slots/materialize", Token: admin,
		Body: map[string]any{"from": day, "to": time.Now().AddDate(0, 0, 3).Format(time.DateOnly)}}, 200)
	var slots []string
	for _, s := range mustDo(bookingtest.Request{Method: "GET", Path: "/v1/clinics/" + clinicID + "/doctors/" + doctorID + "/slots?date=" + day}, 200).JSON()["slots"].([]any) {
		slots = append(slots, s.(map[string]any)["slot_id"].(string))
	}
	if len(slots) < 30 {
		t.Fatalf("%d slots, want at least 30", len(slots))
	}

	// The waiting room, on a simulated clock (the window's clock; slot
	// holds keep the database's time).
	clk := &clock{t: at(4, 6, 57, 0)}
	w := windows(t, fmt.Sprintf(`[{"clinic_id":%q,"timezone":"Europe/Madrid","start":"06:55","opens_at":"07:00","end":"07:30","admit_per_second":2}]`, clinicID))
	rm := waitingroom.NewRoom(w, keyring(t, key2), rdb, waitingroom.Options{Now: clk.Now, Logger: quiet})
	gate.g.Store(rm.Gate())
	identify := ratelimit.Identifier{Tokens: env.Tokens}.Identify
	room := httptest.NewServer(rm.Handler(identify))
	t.Cleanup(room.Close)
	roomDo := func(method, path, token string) map[string]any {
		t.Helper()
		req, _ := http.NewRequest(method, room.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var body map[string]any
		if err := json.NewDecoder(res.Body).Decode(&body); err != nil || res.StatusCode/100 != 2 {
			t.Fatalf("%s %s: %d %v %v", method, path, res.StatusCode, body, err)
		}
		return body
	}
	tickets := make([]string, 30)
	for i := range tickets {
		tickets[i] = roomDo("POST", "/v1/clinics/"+clinicID+"/waiting-room/tickets", env.Token(fmt.Sprintf("g-%d", i), berth.RoleGuest))["ticket"].(string)
	}
	clk.Set(at(4, 7, 0, 5))
	access := make([]string, 30)
	admitted := 0
	for i, tk := range tickets {
		st := roomDo("GET", "/v1/clinics/"+clinicID+"/waiting-room/tickets/"+tk, "")
		if st["admitted"] == true {
			access[i] = st["access_token"].(string)
			admitted++
		}
	}
	if admitted != 10 {
		t.Fatalf("%d admitted at 07:00:05 at 2/s, want 10", admitted)
	}

	hold := func(i int, header map[string]string) bookingtest.Response {
		guest := fmt.Sprintf("g-%d", i)
		return env.Do(bookingtest.Request{Method: "POST", Path: "/v1/clinics/" + clinicID + "/appointments",
			Token: env.Token(guest, berth.RoleGuest), IdemKey: bookingtest.NewKey(), Header: header,
			Body: map[string]any{"guest_id": guest, "slot_id": slots[i]}})
	}
	// An access token is bound to the guest it was issued to: a guest not
	// yet admitted cannot hold with someone else's (finding 10).
	for i := range 30 {
		if access[i] != "" {
			continue
		}
		for j := range 30 {
			if access[j] == "" {
				continue
			}
			if r := hold(i, map[string]string{waitingroom.AccessHeader: access[j]}); r.Status != http.StatusPreconditionRequired ||
				r.Code() != string(berth.CodeWaitingRoom) {
				t.Fatalf("g-%d holds with g-%d's access token: %d %s, want 428 waiting_room", i, j, r.Status, r.Body)
			}
			break
		}
		break
	}
	booked, refused := 0, 0
	for i := range 30 {
		if access[i] != "" {
			if r := hold(i, map[string]string{waitingroom.AccessHeader: access[i]}); r.Status != http.StatusCreated {
				t.Fatalf("admitted g-%d: %d %s", i, r.Status, r.Body)
			}
			booked++
			continue
		}
		r := hold(i, nil)
		if r.Status != http.StatusPreconditionRequired || r.Code() != string(berth.CodeWaitingRoom) {
			t.Fatalf("g-%d without a token: %d %s, want 428 waiting_room", i, r.Status, r.Body)
		}
		if r := hold(i, map[string]string{waitingroom.AccessHeader: tickets[i]}); r.Status != http.StatusPreconditionRequired {
			t.Fatalf("g-%d with its ticket as the token: %d, want 428", i, r.Status)
		}
		refused++
	}
	var live int
	if err := dbtest.SQL(env.DB).QueryRow(context.Background(), `SELECT count(*) FROM appointments WHERE clinic_id = $1`, clinicID).Scan(&live); err != nil {
		t.Fatal(err)
	}
	if booked != 10 || refused != 20 || live != 10 {
		t.Fatalf("booked %d, refused %d, appointments in the database %d; want 10, 20, 10", booked, refused, live)
	}
	t.Logf("07:00:05: 10 admitted patients booked with their access tokens; 20 not yet admitted got 428 waiting_room; %d appointments in the database", live)

	// The window over, holds need no token.
	clk.Set(at(4, 7, 30, 0))
	for i := range 30 {
		if access[i] == "" {
			if r := hold(i, nil); r.Status != http.StatusCreated {
				t.Fatalf("g-%d after the window: %d %s", i, r.Status, r.Body)
			}
		}
	}
}
