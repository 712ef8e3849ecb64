package waitingroom

import (
	"net/http"
	"strings"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/httpapi"
	"github.com/berthhq/berth/internal/ratelimit"
)

// IsPath reports whether path is one of the waiting room's routes, so the
// router can serve it instead of forwarding it.
func IsPath(path string) bool {
	kind, _, rest := httpapi.PartitionPath(path)
	if kind != berth.KindClinic {
		return false
	}
	return rest == "waiting-room/tickets" || strings.HasPrefix(rest, "waiting-room/tickets/")
}

// Handler serves the waiting room's routes:
//
//	POST /v1/clinics/{clinic_id}/waiting-room/tickets          → 201 ticket (200 when already held)
//	GET  /v1/clinics/{clinic_id}/waiting-room/tickets/{ticket} → 200 status
//
// identify names the client (one ticket per identity per window) and the
// verified guest behind it, whom the access token will admit; nil keys
// clients by their address and binds no guest.
func (rm *Room) Handler(identify func(*http.Request) ratelimit.Identity) http.Handler {
	if identify == nil {
		identify = func(r *http.Request) ratelimit.Identity {
			return ratelimit.Identity{Client: "ip:" + ratelimit.RemoteIP(r)}
		}
	}
	mux := http.NewServeMux()
	log := rm.opts.Logger
	mux.HandleFunc("POST /v1/clinics/{clinic_id}/waiting-room/tickets", func(w http.ResponseWriter, r *http.Request) {
		who := identify(r)
		t, err := rm.Issue(r.Context(), r.PathValue("clinic_id"), who.Client, who.Guest)
		if err != nil {
			httpapi.WriteProblem(w, r, log, err)
			return
		}
		// A repeat gets the same ticket, still 201 as API.md fixes it;
		// Berth-Ticket-Reused tells the two apart.
		if !t.Created {
			w.Header().Set("Berth-Ticket-Reused", "true")
		}
		w.Header().Set("Cache-Control", "no-store")
		httpapi.WriteJSON(w, http.StatusCreated, t)
	})
	mux.HandleFunc("GET /v1/clinics/{clinic_id}/waiting-room/tickets/{ticket}", func(w http.ResponseWriter, r *http.Request) {
		st, err := rm.Status(r.Context(), r.PathValue("clinic_id"), r.PathValue("ticket"))
		if err != nil {
			httpapi.WriteProblem(w, r, log, err)
			return
		}
		w.Header().Set("Cache-Control", "no-store")
		httpapi.WriteJSON(w, http.StatusOK, st)
	})
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, pattern := mux.Handler(r); pattern == "" {
			httpapi.WriteProblem(w, r, log, berth.Errorf(berth.CodeNotFound, "no such waiting-room route"))
			return
		}
		mux.ServeHTTP(w, r)
	})
}

// Mount serves the waiting room's paths from rm and passes every other
// request to next (the router).
func (rm *Room) Mount(identify func(*http.Request) ratelimit.Identity, next http.Handler) http.Handler {
	room := rm.Handler(identify)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if IsPath(r.URL.Path) {
			room.ServeHTTP(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}
