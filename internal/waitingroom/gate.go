// Package waitingroom owns the waiting room of clinic openings: per-clinic
// daily windows, signed tickets, the queue in the region's Redis, admission
// at a fixed rate, and the access tokens the booking service checks.
//
// Fairness: a ticket's place is a score in a Redis sorted set. Everyone who
// arrives before the opening gets a uniformly random score below zero, so
// arriving at 06:55:00.001 is worth exactly as much as arriving at 06:59:59;
// everyone after the opening gets the next integer of a counter, first come
// first served behind them. A client identity (verified token subject, valid
// API key, else IP address) holds one ticket per window: asking again
// returns the same ticket, and polling only reads. So a bot that hammers the
// endpoint holds one lottery ticket like everyone else.
//
// Admission needs no background job: position p is admitted once
// floor((now − opening) × rate) ≥ p. An admitted ticket gets a short-lived
// access token bound to the clinic and the ticket; the booking service
// verifies it statelessly (Gate.Check) with the same keys, no Redis needed.
package waitingroom

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/berthhq/berth/internal/berth"
)

// AccessHeader carries the access token on a hold.
const AccessHeader = "Berth-Access-Token"

// Gate decides whether a hold may pass: outside every window, always; inside
// a clinic's window, only with a valid access token for that clinic and
// window. It is safe for concurrent use and does no I/O.
type Gate struct {
	windows map[string]Window
	keys    *Keyring
	now     func() time.Time
}

// NewGate returns a gate over windows (by clinic id) and keys; now may be
// nil (time.Now).
func NewGate(windows map[string]Window, keys *Keyring, now func() time.Time) *Gate {
	if now == nil {
		now = time.Now
	}
	return &Gate{windows: windows, keys: keys, now: now}
}

// Active returns the window occurrence of clinicID active now, if any.
func (g *Gate) Active(clinicID string) (Instance, bool) {
	w, ok := g.windows[strings.ToLower(clinicID)]
	if !ok {
		return Instance{}, false
	}
	return w.Active(g.now())
}

// Check is called by the booking service before an appointment hold by
// subject (the verified token subject of the request). It returns nil
// outside an active window, and a 428 waiting_room error inside one unless r
// carries a valid access token (header Berth-Access-Token) for this clinic,
// this window and this subject: a token issued to one guest admits nobody
// else, so an admitted place cannot be passed on or sold.
func (g *Gate) Check(r *http.Request, clinicID, subject string) error {
	clinicID = strings.ToLower(clinicID)
	in, ok := g.Active(clinicID)
	if !ok {
		return nil
	}
	join := "/v1/clinics/" + clinicID + "/waiting-room/tickets"
	tok := r.Header.Get(AccessHeader)
	if tok == "" {
		return &berth.Error{Code: berth.CodeWaitingRoom,
			Detail: "the waiting room of this clinic is open: join it at POST " + join + " and send the access token in " + AccessHeader,
			Extra:  map[string]any{"waiting_room": join, "opens_at": in.Opens.UTC().Format(time.RFC3339)}}
	}
	c, err := g.keys.verify(tok, typAccess, clinicID, g.now())
	if err == nil && c.Window != in.Date {
		err = ErrInvalid // a token of yesterday's window
	}
	if err == nil && (c.Subject == "" || c.Subject != subject) {
		return &berth.Error{Code: berth.CodeWaitingRoom, Err: fmt.Errorf("%w: issued to another guest", ErrInvalid),
			Detail: "the access token was issued to another guest (or to a ticket taken without signing in); join the waiting room at POST " +
				join + " with your own token",
			Extra: map[string]any{"waiting_room": join}}
	}
	if err != nil {
		return &berth.Error{Code: berth.CodeWaitingRoom, Err: err,
			Detail: "the access token is not valid for this clinic's waiting room now; join it at POST " + join,
			Extra:  map[string]any{"waiting_room": join}}
	}
	return nil
}
