package readmodel

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/httpapi"
	"github.com/berthhq/berth/internal/view"
)

// ServerConfig wires the partner API.
type ServerConfig struct {
	Store  Store
	Tokens httpapi.Verifier
	// CursorKey signs cursors (derived from the token secret by the binary).
	CursorKey []byte
	// Lag reports the view's lag for X-Read-Model-Lag-Ms.
	Lag   func(ctx context.Context) time.Duration
	Ready func(ctx context.Context) error
	Log   *slog.Logger
}

// Server is the read model's HTTP handler.
type Server struct {
	cfg    ServerConfig
	cursor cursorCodec
	mux    *http.ServeMux
}

// NewServer returns the handler of /v1/guests/{guest_id}/reservations,
// /healthz and /readyz.
func NewServer(cfg ServerConfig) *Server {
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	s := &Server{cfg: cfg, cursor: cursorCodec{key: cfg.CursorKey}, mux: http.NewServeMux()}
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "ok"})
	})
	s.mux.HandleFunc("GET /readyz", s.readyz)
	s.mux.HandleFunc("GET /v1/guests/{guest_id}/reservations", s.reservations)
	s.mux.HandleFunc("GET /v1/guests/{guest_id}/partners", s.listGrants)
	s.mux.HandleFunc("PUT /v1/guests/{guest_id}/partners/{partner_id}", s.grant)
	s.mux.HandleFunc("DELETE /v1/guests/{guest_id}/partners/{partner_id}", s.revokeGrant)
	return s
}

func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	// The booking service's check of hostile bytes, shared: a NUL in a
	// guest id is the client's mistake, not an outage of the read model.
	if err := httpapi.CheckRequest(r); err != nil {
		httpapi.WriteProblem(w, r, nil, err)
		return
	}
	if _, pattern := s.mux.Handler(r); pattern == "" {
		httpapi.WriteProblem(w, r, s.cfg.Log, berth.Errorf(berth.CodeNotFound, "no such resource"))
		return
	}
	s.mux.ServeHTTP(w, r)
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Ready != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := s.cfg.Ready(ctx); err != nil {
			s.cfg.Log.WarnContext(r.Context(), "not ready", "err", err)
			httpapi.WriteProblem(w, r, nil, &berth.Error{Code: berth.CodeUnavailable, Detail: "a dependency is unavailable", RetryAfter: 2})
			return
		}
	}
	httpapi.WriteJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// errGuestNotFound is the one answer a partner gets for a guest it may not
// read, whether the guest exists or not: it reveals nothing about them.
var errGuestNotFound = berth.Errorf(berth.CodeNotFound, "guest not found")

// authorize admits a partner key with the read scope for a guest who granted
// that partner, the guest's own token, or an admin token.
func (s *Server) authorize(r *http.Request, guestID string) error {
	if key := r.Header.Get("X-API-Key"); key != "" {
		p, err := s.cfg.Store.PartnerByKey(r.Context(), key)
		if errors.Is(err, view.ErrNotFound) {
			return berth.Errorf(berth.CodeUnauthorized, "the API key is unknown or revoked")
		}
		if err != nil {
			return unavailable(err)
		}
		if p.Scope != view.ScopeGuestReservations {
			return berth.Errorf(berth.CodeForbidden, "the API key may not read guests' reservations")
		}
		ok, err := s.cfg.Store.Granted(r.Context(), guestID, p.ID)
		if err != nil {
			return unavailable(err)
		}
		if !ok {
			return errGuestNotFound
		}
		return nil
	}
	if r.Header.Get("Authorization") == "" {
		return berth.Errorf(berth.CodeUnauthorized, "send X-API-Key or Authorization: Bearer <token>")
	}
	p, err := httpapi.BearerPrincipal(r, s.cfg.Tokens)
	if err != nil {
		return err
	}
	if (p.Role == berth.RoleGuest && p.Subject == guestID) || p.Role == berth.RoleAdmin {
		return nil
	}
	return berth.Errorf(berth.CodeForbidden, "a guest may read only their own reservations")
}

type itemJSON struct {
	Kind        string    `json:"kind"`
	PartitionID string    `json:"partition_id"`
	ID          string    `json:"id"`
	Status      string    `json:"status"`
	Start       string    `json:"start"`
	End         string    `json:"end"`
	Title       string    `json:"title"`
	UpdatedAt   time.Time `json:"updated_at"`
}

type pageJSON struct {
	Items      []itemJSON `json:"items"`
	NextCursor *string    `json:"next_cursor"`
}

var validStatus = map[string]bool{"held": true, "confirmed": true, "cancelled": true, "expired": true, "no_show": true,
	"checked_in": true, "checked_out": true, "arrived": true, "completed": true, "walking": true, "walked": true}

func (s *Server) reservations(w http.ResponseWriter, r *http.Request) {
	guestID := r.PathValue("guest_id")
	if err := s.authorize(r, guestID); err != nil {
		httpapi.WriteProblem(w, r, s.cfg.Log, err)
		return
	}
	q, err := s.parseQuery(r, guestID)
	if err != nil {
		httpapi.WriteProblem(w, r, s.cfg.Log, err)
		return
	}
	items, more, err := s.cfg.Store.List(r.Context(), q)
	if err != nil {
		// The store says which failures are outages (503, the client
		// retries); anything else is our bug, a logged 500 — never an
		// outage blamed on input.
		httpapi.WriteProblem(w, r, s.cfg.Log, err)
		return
	}
	page := pageJSON{Items: make([]itemJSON, 0, len(items))}
	for _, it := range items {
		page.Items = append(page.Items, itemJSON{Kind: it.Kind, PartitionID: it.PartitionID, ID: it.ID, Status: it.Status,
			Start: it.Start, End: it.End, Title: it.Title, UpdatedAt: it.UpdatedAt})
	}
	if more && len(items) > 0 {
		last := items[len(items)-1]
		c := s.cursor.encode(scopeOf(q), view.Position{SortAt: last.SortAt, Kind: last.Kind, PartitionID: last.PartitionID, ID: last.ID})
		page.NextCursor = &c
	}
	if s.cfg.Lag != nil {
		w.Header().Set("X-Read-Model-Lag-Ms", strconv.FormatInt(s.cfg.Lag(r.Context()).Milliseconds(), 10))
	}
	w.Header().Set("Cache-Control", "private, no-store")
	httpapi.WriteJSON(w, http.StatusOK, page)
}

func scopeOf(q view.Query) string { return q.GuestID + "\x00" + q.Kind + "\x00" + q.Status }

func (s *Server) parseQuery(r *http.Request, guestID string) (view.Query, error) {
	v := r.URL.Query()
	q := view.Query{GuestID: guestID, Kind: v.Get("kind"), Status: v.Get("status"), Limit: 20}
	var f []berth.FieldError
	if guestID == "" || len(guestID) > 200 {
		f = append(f, berth.FieldError{Field: "guest_id", Message: "want 1 to 200 characters"})
	}
	if q.Kind != "" && !berth.Kind(q.Kind).Valid() {
		f = append(f, berth.FieldError{Field: "kind", Message: "want hotel or clinic"})
	}
	if q.Status != "" && !validStatus[q.Status] {
		f = append(f, berth.FieldError{Field: "status", Message: "want held, confirmed, cancelled, expired, no_show, checked_in, checked_out, arrived, completed, walking or walked"})
	}
	if l := v.Get("limit"); l != "" {
		n, err := strconv.Atoi(l)
		if err != nil || n < 1 || n > 100 {
			f = append(f, berth.FieldError{Field: "limit", Message: "want an integer from 1 to 100"})
		}
		q.Limit = n
	}
	if len(f) > 0 {
		return q, berth.Invalid(f...)
	}
	if c := v.Get("cursor"); c != "" {
		p, err := s.cursor.decode(scopeOf(q), c)
		if err != nil {
			return q, berth.Invalid(berth.FieldError{Field: "cursor", Message: "invalid cursor; start again without it"})
		}
		q.After = &p
	}
	return q, nil
}

func unavailable(err error) error {
	return &berth.Error{Code: berth.CodeUnavailable, Detail: "the read model is unavailable", RetryAfter: 1, Err: err}
}

// guestOnly admits only the guest's own token: a grant is the guest's
// consent, given or withdrawn by nobody else (not a partner, not an admin).
// adminToo also admits an admin token (reading the list of grants).
func (s *Server) guestOnly(r *http.Request, guestID string, adminToo bool) error {
	if r.Header.Get("Authorization") == "" {
		return berth.Errorf(berth.CodeUnauthorized, "send Authorization: Bearer <the guest's token>")
	}
	p, err := httpapi.BearerPrincipal(r, s.cfg.Tokens)
	if err != nil {
		return err
	}
	if (p.Role == berth.RoleGuest && p.Subject == guestID) || (adminToo && p.Role == berth.RoleAdmin) {
		return nil
	}
	return berth.Errorf(berth.CodeForbidden, "only the guest may manage which partners read their reservations")
}

type grantsJSON struct {
	Partners []view.Grant `json:"partners"`
}

// listGrants answers GET /v1/guests/{guest_id}/partners.
func (s *Server) listGrants(w http.ResponseWriter, r *http.Request) {
	guestID := r.PathValue("guest_id")
	if err := s.guestOnly(r, guestID, true); err != nil {
		httpapi.WriteProblem(w, r, s.cfg.Log, err)
		return
	}
	gs, err := s.cfg.Store.Grants(r.Context(), guestID)
	if err != nil {
		httpapi.WriteProblem(w, r, s.cfg.Log, unavailable(err))
		return
	}
	if gs == nil {
		gs = []view.Grant{}
	}
	w.Header().Set("Cache-Control", "private, no-store")
	httpapi.WriteJSON(w, http.StatusOK, grantsJSON{Partners: gs})
}

// grant answers PUT /v1/guests/{guest_id}/partners/{partner_id}: idempotent,
// 200 with the grant; an unknown or revoked partner is 404.
func (s *Server) grant(w http.ResponseWriter, r *http.Request) {
	guestID, partnerID := r.PathValue("guest_id"), r.PathValue("partner_id")
	if err := s.guestOnly(r, guestID, false); err != nil {
		httpapi.WriteProblem(w, r, s.cfg.Log, err)
		return
	}
	g, err := s.cfg.Store.GrantPartner(r.Context(), guestID, partnerID)
	if errors.Is(err, view.ErrNotFound) {
		httpapi.WriteProblem(w, r, s.cfg.Log, berth.Errorf(berth.CodeNotFound, "partner not found"))
		return
	}
	if err != nil {
		httpapi.WriteProblem(w, r, s.cfg.Log, unavailable(err))
		return
	}
	httpapi.WriteJSON(w, http.StatusOK, g)
}

// revokeGrant answers DELETE /v1/guests/{guest_id}/partners/{partner_id}:
// idempotent, 204 whether or not there was a grant; the partner's next read
// of the guest is 404.
func (s *Server) revokeGrant(w http.ResponseWriter, r *http.Request) {
	guestID, partnerID := r.PathValue("guest_id"), r.PathValue("partner_id")
	if err := s.guestOnly(r, guestID, false); err != nil {
		httpapi.WriteProblem(w, r, s.cfg.Log, err)
		return
	}
	if _, err := s.cfg.Store.RevokeGrant(r.Context(), guestID, partnerID); err != nil {
		httpapi.WriteProblem(w, r, s.cfg.Log, unavailable(err))
		return
	}
	w.WriteHeader(http.StatusNoContent)
}
