package waitingroom_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/ratelimit"
	"github.com/berthhq/berth/internal/waitingroom"
)

// server is the room's HTTP handler; clients are told apart by address.
func server(t *testing.T, rm *waitingroom.Room) *httptest.Server {
	t.Helper()
	// The client's name is also the verified guest its tickets are bound to.
	srv := httptest.NewServer(rm.Handler(func(r *http.Request) ratelimit.Identity {
		c := r.Header.Get("X-Test-Client")
		return ratelimit.Identity{Client: c, Guest: c}
	}))
	t.Cleanup(srv.Close)
	return srv
}

type answer struct {
	status int
	header http.Header
	body   map[string]any
}

func call(t *testing.T, method, url, client string) answer {
	t.Helper()
	req, _ := http.NewRequest(method, url, nil)
	req.Header.Set("X-Test-Client", client)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var body map[string]any
	_ = json.NewDecoder(res.Body).Decode(&body)
	return answer{res.StatusCode, res.Header, body}
}

// TestTicketFlow walks one morning through HTTP: random places before the
// opening, FCFS after, one ticket per client, polling that never improves a
// position, admission at the configured rate, and the access token that
// opens the gate.
func TestTicketFlow(t *testing.T) {
	_, rdb := redisClient(t)
	clk := &clock{t: at(4, 6, 50, 0)}
	rm := waitingroom.NewRoom(windows(t, morning), keyring(t, key2, key1), rdb, waitingroom.Options{Now: clk.Now, Logger: quiet})
	srv := server(t, rm)
	base := srv.URL + "/v1/clinics/c1/waiting-room/tickets"

	if a := call(t, "POST", base, "early"); a.status != http.StatusNotFound || a.body["starts_at"] == nil {
		t.Fatalf("before the window starts: %d %v", a.status, a.body)
	}
	if a := call(t, "POST", srv.URL+"/v1/clinics/nope/waiting-room/tickets", "x"); a.status != http.StatusNotFound {
		t.Fatalf("unknown clinic: %d", a.status)
	}

	// 40 patients before the opening, one of them asking five times.
	clk.Set(at(4, 6, 56, 0))
	tickets := map[string]string{}
	for i := range 40 {
		client := "p" + string(rune('A'+i%26)) + string(rune('a'+i/26))
		a := call(t, "POST", base, client)
		if a.status != http.StatusCreated || a.body["ticket"] == nil || a.body["position"] == nil || a.body["estimated_wait_seconds"] == nil {
			t.Fatalf("POST ticket: %d %v", a.status, a.body)
		}
		tickets[client] = a.body["ticket"].(string)
	}
	for range 5 {
		a := call(t, "POST", base, "pAa")
		if a.body["ticket"] != tickets["pAa"] || a.header.Get("Berth-Ticket-Reused") != "true" {
			t.Fatalf("a second POST by the same client got a different ticket: %v", a.body)
		}
	}

	// After the opening: first come, first served behind all 40.
	clk.Set(at(4, 7, 0, 0))
	late1 := call(t, "POST", base, "late1")
	late2 := call(t, "POST", base, "late2")
	if late1.body["position"] != float64(41) || late2.body["position"] != float64(42) {
		t.Fatalf("late arrivals: %v %v, want positions 41 and 42", late1.body["position"], late2.body["position"])
	}

	// Positions are a permutation of 1..40 and polling does not move them.
	seen := map[float64]bool{}
	for client, tok := range tickets {
		a := call(t, "GET", base+"/"+tok, client)
		if a.status != http.StatusOK || a.body["admitted"] != false || a.body["access_token"] != nil {
			t.Fatalf("status at the opening: %d %v", a.status, a.body)
		}
		p := a.body["position"].(float64)
		if p < 1 || p > 40 || seen[p] {
			t.Fatalf("position %v repeated or out of 1..40", p)
		}
		seen[p] = true
		for range 3 {
			if again := call(t, "GET", base+"/"+tok, client); again.body["position"] != p {
				t.Fatalf("re-polling moved %v to %v", p, again.body["position"])
			}
		}
	}

	// Ten seconds in, at 2/s: positions 1..20 are admitted.
	clk.Set(at(4, 7, 0, 10))
	gate := rm.Gate()
	admitted := 0
	for client, tok := range tickets {
		a := call(t, "GET", base+"/"+tok, "anyone") // the ticket is the bearer
		pos := a.body["position"].(float64)
		if want := pos <= 20; a.body["admitted"] != want {
			t.Fatalf("position %v admitted=%v at 07:00:10", pos, a.body["admitted"])
		}
		hold := httptest.NewRequest("POST", "/v1/clinics/c1/appointments", nil)
		if a.body["admitted"] == true {
			admitted++
			hold.Header.Set(waitingroom.AccessHeader, a.body["access_token"].(string))
			if err := gate.Check(hold, "c1", client); err != nil {
				t.Fatalf("admitted token refused: %v", err)
			}
			if err := gate.Check(hold, "c2", client); berth.ErrorCode(err) != berth.CodeWaitingRoom {
				t.Fatalf("a c1 token opened c2: %v", err)
			}
			if err := gate.Check(hold, "c1", client+"-other"); berth.ErrorCode(err) != berth.CodeWaitingRoom {
				t.Fatalf("%s's token admitted another guest: %v", client, err)
			}
		} else if err := gate.Check(hold, "c1", client); berth.ErrorCode(err) != berth.CodeWaitingRoom {
			t.Fatalf("no token during the window: %v, want waiting_room", err)
		}
	}
	if admitted != 20 {
		t.Fatalf("%d admitted, want 20", admitted)
	}
	// A ticket is not an access token.
	hold := httptest.NewRequest("POST", "/v1/clinics/c1/appointments", nil)
	hold.Header.Set(waitingroom.AccessHeader, tickets["pAa"])
	if err := gate.Check(hold, "c1", "pAa"); berth.ErrorCode(err) != berth.CodeWaitingRoom {
		t.Fatalf("a ticket used as an access token: %v", err)
	}
	// After the window, holds need nothing.
	clk.Set(at(4, 7, 30, 0))
	if err := gate.Check(httptest.NewRequest("POST", "/", nil), "c1", "anyone"); err != nil {
		t.Fatalf("after the window: %v", err)
	}
	if a := call(t, "GET", base+"/"+tickets["pAa"], "pAa"); a.status != http.StatusUnauthorized {
		t.Fatalf("a ticket after its window: %d, want 401 (expired)", a.status)
	}
}

// TestTamperedTickets: every way of forging a ticket is refused — 400 for
// garbage, 401 for anything that does not verify.
func TestTamperedTickets(t *testing.T) {
	_, rdb := redisClient(t)
	clk := &clock{t: at(4, 6, 58, 0)}
	rm := waitingroom.NewRoom(windows(t, morning), keyring(t, key2), rdb, waitingroom.Options{Now: clk.Now, Logger: quiet})
	srv := server(t, rm)
	base := srv.URL + "/v1/clinics/c1/waiting-room/tickets"
	tok := call(t, "POST", base, "me").body["ticket"].(string)
	if a := call(t, "GET", base+"/"+tok, "me"); a.status != http.StatusOK {
		t.Fatalf("genuine ticket: %d %v", a.status, a.body)
	}
	parts := strings.Split(tok, ".")
	payload, _ := base64.RawURLEncoding.DecodeString(parts[1])
	better := strings.Replace(string(payload), `"tid":"`, `"tid":"0`, 1) // another ticket id
	forgedPayload := base64.RawURLEncoding.EncodeToString([]byte(better))
	flip := func(s string) string {
		b := []byte(s)
		if b[len(b)/2] == 'A' {
			b[len(b)/2] = 'B'
		} else {
			b[len(b)/2] = 'A'
		}
		return string(b)
	}
	for name, c := range map[string]struct {
		tok  string
		want int
	}{
		"payload swapped": {parts[0] + "." + forgedPayload + "." + parts[2], http.StatusUnauthorized},
		"mac flipped":     {parts[0] + "." + parts[1] + "." + flip(parts[2]), http.StatusUnauthorized},
		"unknown key id":  {"k9." + parts[1] + "." + parts[2], http.StatusUnauthorized},
		"re-keyed by k1":  {"k1." + parts[1] + "." + parts[2], http.StatusUnauthorized},
		"no mac":          {parts[0] + "." + parts[1], http.StatusBadRequest},
		"bad base64":      {parts[0] + ".!!!." + parts[2], http.StatusBadRequest},
		"short mac":       {parts[0] + "." + parts[1] + ".AAAA", http.StatusBadRequest},
		"garbage":         {"hello", http.StatusBadRequest},
	} {
		if a := call(t, "GET", base+"/"+c.tok, "me"); a.status != c.want || a.body["code"] == nil {
			t.Errorf("%s: %d %v, want %d", name, a.status, a.body, c.want)
		}
	}
	if a := call(t, "GET", srv.URL+"/v1/clinics/c2/waiting-room/tickets/"+tok, "me"); a.status != http.StatusUnauthorized {
		t.Errorf("a c1 ticket at c2: %d, want 401", a.status)
	}
}

// TestKeyRotation: tickets signed by the old key keep verifying once a new
// key signs; dropping the old key retires them.
func TestKeyRotation(t *testing.T) {
	_, rdb := redisClient(t)
	clk := &clock{t: at(4, 6, 58, 0)}
	w := windows(t, morning)
	old := waitingroom.NewRoom(w, keyring(t, key1), rdb, waitingroom.Options{Now: clk.Now, Logger: quiet})
	rotated := waitingroom.NewRoom(w, keyring(t, key2, key1), rdb, waitingroom.Options{Now: clk.Now, Logger: quiet})
	retired := waitingroom.NewRoom(w, keyring(t, key2), rdb, waitingroom.Options{Now: clk.Now, Logger: quiet})
	ctx := context.Background()
	tk, err := old.Issue(ctx, "c1", "me", "me")
	if err != nil || !strings.HasPrefix(tk.Token, "k1.") {
		t.Fatalf("old key: %v %q", err, tk.Token)
	}
	if _, err := rotated.Status(ctx, "c1", tk.Token); err != nil {
		t.Fatalf("k1 ticket after rotation: %v", err)
	}
	again, err := rotated.Issue(ctx, "c1", "me", "me")
	if err != nil || !strings.HasPrefix(again.Token, "k2.") || again.Position != tk.Position {
		t.Fatalf("same ticket re-signed by k2: %v %q pos %d/%d", err, again.Token, again.Position, tk.Position)
	}
	if _, err := retired.Status(ctx, "c1", tk.Token); berth.ErrorCode(err) != berth.CodeUnauthorized {
		t.Fatalf("k1 ticket after k1 was dropped: %v, want unauthorized", err)
	}
}

// TestRedisDown: without Redis the room answers 503 with Retry-After, and
// the gate (no Redis) still decides.
func TestRedisDown(t *testing.T) {
	rs, rdb := redisClient(t)
	clk := &clock{t: at(4, 6, 58, 0)}
	rm := waitingroom.NewRoom(windows(t, morning), keyring(t, key2), rdb, waitingroom.Options{Now: clk.Now, Logger: quiet, Timeout: 200 * time.Millisecond})
	srv := server(t, rm)
	rs.Stop()
	a := call(t, "POST", srv.URL+"/v1/clinics/c1/waiting-room/tickets", "me")
	if a.status != http.StatusServiceUnavailable || a.header.Get("Retry-After") == "" {
		t.Fatalf("Redis down: %d %v", a.status, a.body)
	}
	if err := rm.Gate().Check(httptest.NewRequest("POST", "/", nil), "c1", "anyone"); berth.ErrorCode(err) != berth.CodeWaitingRoom {
		t.Fatalf("gate with Redis down: %v", err)
	}
}

func TestIsPath(t *testing.T) {
	t.Parallel()
	for path, want := range map[string]bool{
		"/v1/clinics/c1/waiting-room/tickets":     true,
		"/v1/clinics/c1/waiting-room/tickets/abc": true,
		"/v1/clinics/c1/appointments":             false,
		"/v1/hotels/c1/waiting-room/tickets":      false,
		"/v1/clinics/c1/waiting-room":             false,
	} {
		if waitingroom.IsPath(path) != want {
			t.Errorf("IsPath(%q) = %v", path, !want)
		}
	}
}

// TestLostQueueKeepsTheRate: a queue created after the opening — by a late
// first arrival, or again after Redis lost it — numbers its places after
// every position admitted so far, so losing the queue never admits a second
// crowd at once: admission stays at the window's rate. Tickets of the lost
// queue are 404 (join again), and arrivals stay first come, first served.
func TestLostQueueKeepsTheRate(t *testing.T) {
	_, rdb := redisClient(t)
	clk := &clock{t: at(4, 7, 0, 10)} // 10 s after the opening at 2/s: 20 admitted
	rm := waitingroom.NewRoom(windows(t, morning), keyring(t, key2), rdb, waitingroom.Options{Now: clk.Now, Logger: quiet})
	srv := server(t, rm)
	base := srv.URL + "/v1/clinics/c1/waiting-room/tickets"

	first := call(t, "POST", base, "first")
	second := call(t, "POST", base, "second")
	if first.body["position"] != float64(21) || second.body["position"] != float64(22) {
		t.Fatalf("a queue created 10 s after the opening: positions %v, %v, want 21, 22 (after the 20 admitted so far)",
			first.body["position"], second.body["position"])
	}
	if a := call(t, "GET", base+"/"+first.body["ticket"].(string), "first"); a.body["admitted"] != false || a.body["position"] != float64(21) {
		t.Fatalf("status right after joining: %v", a.body)
	}
	clk.Set(at(4, 7, 0, 11)) // 22 admitted
	if a := call(t, "GET", base+"/"+second.body["ticket"].(string), "second"); a.body["admitted"] != true {
		t.Fatalf("position 22 at 07:00:11: %v", a.body)
	}

	// Redis loses everything at 07:00:20 (40 admitted by then).
	clk.Set(at(4, 7, 0, 20))
	if err := rdb.FlushAll(context.Background()).Err(); err != nil {
		t.Fatal(err)
	}
	if a := call(t, "GET", base+"/"+first.body["ticket"].(string), "first"); a.status != http.StatusNotFound {
		t.Fatalf("a ticket of the lost queue: %d %v, want 404 (join again)", a.status, a.body)
	}
	again := call(t, "POST", base, "first")
	later := call(t, "POST", base, "later")
	if again.body["position"] != float64(41) || later.body["position"] != float64(42) || again.body["ticket"] == first.body["ticket"] {
		t.Fatalf("after the loss: positions %v, %v, want 41, 42 (nobody admitted ahead of the rate)", again.body["position"], later.body["position"])
	}
	if a := call(t, "GET", base+"/"+again.body["ticket"].(string), "first"); a.body["admitted"] != false {
		t.Fatalf("a new ticket right after the loss was admitted at once: %v", a.body)
	}
}
