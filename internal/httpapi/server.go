package httpapi

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"runtime/debug"
	"time"

	"github.com/berthhq/berth/internal/auth"
	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/payments"
	"github.com/berthhq/berth/internal/reservation"
)

// HotelStore is what the hotel routes need from the database.
type HotelStore interface {
	CreateHotel(ctx context.Context, h reservation.Hotel) (reservation.Hotel, error)
	GetHotel(ctx context.Context, hotelID string) (reservation.Hotel, error)
	UpdateHotel(ctx context.Context, hotelID string, p reservation.HotelPatch) (reservation.Hotel, error)
	CreateRoomType(ctx context.Context, rt reservation.RoomType) (reservation.RoomType, error)
	SetInventory(ctx context.Context, hotelID, roomTypeID string, from, to reservation.Date, total int, onlyMissing bool) (int, error)
	Availability(ctx context.Context, hotelID string, stay reservation.Stay, roomTypeID string) (reservation.Availability, error)
	Hold(ctx context.Context, req reservation.HoldRequest, idem *berth.Idem) (berth.Response, error)
	GetReservation(ctx context.Context, hotelID, reservationID string) (reservation.Reservation, error)
	Confirm(ctx context.Context, hotelID, reservationID string, pay payments.Payment, authorize func(guestID string) error, idem *berth.Idem) (berth.Response, error)
	Cancel(ctx context.Context, hotelID, reservationID string, authorize func(guestID string) error, idem *berth.Idem) (berth.Response, error)
}

// Config wires a Server.
type Config struct {
	Region string
	Hotels HotelStore
	// Stays serves the rooms and front-desk routes when set (rooms.go,
	// desk.go).
	Stays StayStore
	// Waitlist serves the hotel waitlist routes when set (waitlist.go).
	Waitlist WaitlistStore
	// Clinics serves the clinic routes when set (clinics.go).
	Clinics ClinicStore
	// ClinicWaitlist serves the clinic waitlist routes when set with
	// Clinics (clinic_waitlist.go).
	ClinicWaitlist ClinicWaitlistStore
	// Payments serves the payment webhook when set (payments.go).
	Payments PaymentStore
	// PaymentProvider creates the payment intents of prepaid holds and
	// verifies a guest's payment_ref before a confirmation; without it a
	// guest cannot confirm a hold that costs money (payments_verify.go).
	PaymentProvider PaymentProvider
	// StripeWebhook serves POST /v1/payments/stripe/webhook when set: Stripe's
	// own signed events, checked against Stripe (stripe_webhook.go). It needs
	// PaymentProvider.
	StripeWebhook *StripeWebhook
	// DevPayments serves the development-only POST /v1/dev/payments/{intent_id}/pay
	// when set; never in production (devpay.go).
	DevPayments *DevPayments
	// Placements serves the placement routes when set (placements.go).
	Placements PlacementStore
	Tokens     *auth.Tokens
	Logger     *slog.Logger
	// Ready reports whether the service's dependencies answer (/readyz).
	Ready func(ctx context.Context) error
	// Metrics serves /metrics when set.
	Metrics http.Handler
	// Now returns the current time (tests may fix it).
	Now func() time.Time
	// Cache, when set, serves public reads through the regional read cache
	// and is invalidated after each hotel write (cache.go).
	Cache Cache
	// Search, when set, answers GET /v1/hotels from the regional search
	// index (search_index.go) instead of the database.
	Search HotelIndex
	// SearchAdmin, when set, serves the rebuild of the search index
	// (POST and GET /v1/search/rebuild, role ops).
	SearchAdmin SearchAdmin
	// WaitingRoom, when set, gates clinic appointment holds while a clinic's
	// waiting room is open: 428 waiting_room without a valid access token
	// issued to the holding principal (subject) (internal/waitingroom.Gate).
	WaitingRoom interface {
		Check(r *http.Request, clinicID, subject string) error
	}
}

// Server is the booking service's HTTP handler.
type Server struct {
	cfg Config
	log *slog.Logger
	mux *http.ServeMux
}

// New returns a Server with every route registered.
func New(cfg Config) *Server {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	s := &Server{cfg: cfg, log: cfg.Logger, mux: http.NewServeMux()}
	withCache(s)
	s.routes()
	return s
}

func (s *Server) routes() {
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		WriteJSON(w, http.StatusOK, map[string]string{"status": "ok", "region": s.cfg.Region})
	})
	s.mux.HandleFunc("GET /readyz", s.readyz)
	if s.cfg.Metrics != nil {
		s.mux.Handle("GET /metrics", s.cfg.Metrics)
	}
	if s.cfg.Hotels != nil {
		s.hotelRoutes()
	}
	if s.cfg.Stays != nil {
		s.roomRoutes()
	}
	if s.cfg.Waitlist != nil && s.cfg.Hotels != nil {
		s.waitlistRoutes()
	}
	if s.cfg.Clinics != nil {
		s.clinicRoutes()
	}
	if s.cfg.ClinicWaitlist != nil && s.cfg.Clinics != nil {
		s.clinicWaitlistRoutes()
	}
	if s.cfg.Payments != nil {
		s.paymentRoutes()
	}
	if s.cfg.StripeWebhook != nil && s.cfg.PaymentProvider != nil {
		s.stripeWebhookRoutes()
	}
	if s.cfg.Placements != nil {
		s.placementRoutes()
	}
	if s.cfg.DevPayments != nil {
		s.devPaymentRoutes()
	}
	if s.cfg.SearchAdmin != nil {
		s.mux.HandleFunc("POST /v1/search/rebuild", s.handle(s.startSearchRebuild))
		s.mux.HandleFunc("GET /v1/search/rebuild", s.handle(s.searchRebuildProgress))
	}
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Ready != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := s.cfg.Ready(ctx); err != nil {
			s.log.WarnContext(r.Context(), "not ready", "err", err)
			WriteProblem(w, r, nil, &berth.Error{Code: berth.CodeUnavailable, Detail: "a dependency is unavailable", RetryAfter: 2})
			return
		}
	}
	WriteJSON(w, http.StatusOK, map[string]string{"status": "ready", "region": s.cfg.Region})
}

// ServeHTTP adds the service's headers, turns panics into a logged 500
// problem, refuses hostile bytes in the path, query and headers before any
// route sees them (edge.go), and answers unknown routes and methods with
// problems too.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Berth-Served-By", s.cfg.Region)
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.ErrorContext(r.Context(), "panic", "panic", v, "stack", string(debug.Stack()))
			WriteProblem(w, r, nil, &berth.Error{Code: berth.CodeInternal, Detail: "an internal error occurred"})
		}
	}()
	if err := CheckRequest(r); err != nil {
		WriteProblem(w, r, nil, err)
		return
	}
	if _, pattern := s.mux.Handler(r); pattern == "" {
		s.noRoute(w, r)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// noRoute answers 405 when the path exists for another method, else 404.
func (s *Server) noRoute(w http.ResponseWriter, r *http.Request) {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodDelete} {
		probe := r.Clone(r.Context())
		probe.Method = m
		if _, p := s.mux.Handler(probe); p != "" {
			allow = append(allow, m)
		}
	}
	if len(allow) > 0 {
		for _, m := range allow {
			w.Header().Add("Allow", m)
		}
		status, body := problemWithStatus(http.StatusMethodNotAllowed, berth.CodeInvalidRequest, "method "+r.Method+" is not allowed here")
		w.Header().Set("Content-Type", ProblemContentType)
		w.WriteHeader(status)
		_, _ = w.Write(body)
		return
	}
	WriteProblem(w, r, nil, berth.Errorf(berth.CodeNotFound, "no such resource"))
}

func problemWithStatus(status int, code berth.Code, detail string) (int, []byte) {
	doc := map[string]any{"type": "https://berth.dev/problems/" + string(code), "title": http.StatusText(status),
		"status": status, "detail": detail, "code": code}
	b, _ := json.Marshal(doc)
	return status, b
}
