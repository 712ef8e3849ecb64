package httpapi

import (
	"context"
	"net/http"
	"strings"

	"github.com/berthhq/berth/internal/appointment"
	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/waitlist"
	"github.com/google/uuid"
)

// ClinicWaitlistStore is what the clinic waitlist routes need from the
// database (docs/adr/0015-clinic-waitlist.md).
type ClinicWaitlistStore interface {
	JoinClinicWaitlist(ctx context.Context, req waitlist.ClinicJoinRequest, idem *berth.Idem) (berth.Response, error)
	LeaveClinicWaitlist(ctx context.Context, clinicID, entryID string, authorize func(guestID string) error, idem *berth.Idem) (berth.Response, error)
	GetClinicWaitlistEntry(ctx context.Context, clinicID, entryID string) (waitlist.ClinicEntry, error)
	ListClinicWaitlist(ctx context.Context, clinicID string, f waitlist.ClinicFilter) ([]waitlist.ClinicEntry, error)
}

func (s *Server) clinicWaitlistRoutes() {
	s.mux.HandleFunc("POST /v1/clinics/{clinic_id}/waitlist", s.handle(s.joinClinicWaitlist))
	s.mux.HandleFunc("GET /v1/clinics/{clinic_id}/waitlist", s.handle(s.listClinicWaitlist))
	s.mux.HandleFunc("GET /v1/clinics/{clinic_id}/waitlist/{entry_id}", s.handle(s.getClinicWaitlistEntry))
	s.mux.HandleFunc("POST /v1/clinics/{clinic_id}/waitlist/{entry_id}/leave", s.handle(s.leaveClinicWaitlist))
}

type clinicJoinRequest struct {
	GuestID  string `json:"guest_id"`
	DoctorID string `json:"doctor_id"`
	Date     string `json:"date"`
	Window   *struct {
		From string `json:"from"`
		To   string `json:"to"`
	} `json:"window,omitempty"`
	ContactEmail string `json:"contact_email,omitempty"`
	ContactPhone string `json:"contact_phone,omitempty"`
}

// clinicWaitlistPrincipal is who may use the clinic waitlist routes: a
// patient (for themselves), the clinic's staff, an admin.
func (s *Server) clinicWaitlistPrincipal(r *http.Request, clinicID string) (berth.Principal, error) {
	return s.requireClinicRole(r, clinicID, berth.RoleGuest, berth.RoleStaff, berth.RoleAdmin)
}

// joinClinicWaitlist puts a patient in a doctor's line for a slot on a day,
// or in a window of that day.
func (s *Server) joinClinicWaitlist(w http.ResponseWriter, r *http.Request) error {
	clinicID, p, err := clinicLine.partition(s, r)
	if err != nil {
		return err
	}
	key, err := IdempotencyKey(r)
	if err != nil {
		return err
	}
	var req clinicJoinRequest
	if err := Decode(w, r, &req); err != nil {
		return err
	}
	var f Fields
	jr := waitlist.ClinicJoinRequest{EntryID: uuid.NewString(), ClinicID: clinicID,
		GuestID: text(&f, "guest_id", req.GuestID, 128), ContactEmail: req.ContactEmail, ContactPhone: req.ContactPhone}
	if req.DoctorID == "" {
		f.Add("doctor_id", "required")
	}
	if req.Date == "" {
		f.Add("date", "required")
	} else if d, err := appointment.ParseDate(req.Date); err != nil {
		f.Add("date", "want YYYY-MM-DD")
	} else {
		jr.Date = d
	}
	if req.Window != nil {
		win := waitlist.Window{From: parseInstant(&f, "window.from", req.Window.From), To: parseInstant(&f, "window.to", req.Window.To)}
		if !win.From.IsZero() && !win.To.IsZero() && !win.From.Before(win.To) {
			f.Add("window.to", "must be after window.from")
		}
		jr.Window = &win
	}
	contactFields(&f, req.ContactEmail, req.ContactPhone)
	if err := f.Err(); err != nil {
		return err
	}
	if !ValidID(req.DoctorID) {
		return berth.Errorf(berth.CodeNotFound, "doctor %q not found", truncate(req.DoctorID, 64))
	}
	jr.DoctorID = strings.ToLower(req.DoctorID)
	if !p.MayActForGuest(berth.KindClinic, clinicID, jr.GuestID) {
		return berth.Errorf(berth.CodeForbidden, "a patient may join a waitlist only for themselves")
	}
	resp, err := s.cfg.ClinicWaitlist.JoinClinicWaitlist(r.Context(), jr,
		&berth.Idem{Key: key, Hash: RequestHash("clinic-waitlist-join:"+clinicID, p.Subject, req), Render: render(http.StatusCreated)})
	if err != nil {
		return err
	}
	writeResponse(w, resp)
	return nil
}

func (s *Server) leaveClinicWaitlist(w http.ResponseWriter, r *http.Request) error {
	return s.leaveEntry(w, r, clinicLine, s.cfg.ClinicWaitlist.LeaveClinicWaitlist)
}

// clinicWaitlistEntryView is an entry as GET shows it: with the payment of
// a held, prepaid offer.
type clinicWaitlistEntryView struct {
	waitlist.ClinicEntry
	Payment *paymentView `json:"payment,omitempty"`
}

// getClinicWaitlistEntry shows a patient their entry: the position while it
// waits, the offer once made (with the payment intent of a prepaid offer
// still held).
func (s *Server) getClinicWaitlistEntry(w http.ResponseWriter, r *http.Request) error {
	clinicID, entryID, err := clinicLine.entryPath(r)
	if err != nil {
		return err
	}
	p, err := s.Principal(r)
	if err != nil {
		return err
	}
	e, err := s.cfg.ClinicWaitlist.GetClinicWaitlistEntry(r.Context(), clinicID, entryID)
	if err != nil {
		return err
	}
	if err := forGuest(p, berth.KindClinic, clinicID)(e.GuestID); err != nil {
		return err
	}
	view := clinicWaitlistEntryView{ClinicEntry: e}
	if e.Offer != nil && e.Offer.AppointmentStatus == appointment.StatusHeld && s.cfg.PaymentProvider != nil {
		a, err := s.cfg.Clinics.GetAppointment(r.Context(), clinicID, e.Offer.AppointmentID)
		if err != nil {
			return err
		}
		if a.PriceCents != nil && *a.PriceCents > 0 && a.Currency != "" {
			pay, err := s.paymentIntent(r.Context(), berth.KindClinic, clinicID, a.ID, *a.PriceCents, a.Currency)
			if err != nil {
				return err
			}
			view.Payment = &pay
		}
	}
	WriteJSON(w, http.StatusOK, view)
	return nil
}

// listClinicWaitlist lists a clinic's lines: staff and admins see every
// entry, a patient only their own (guest_id is then required).
func (s *Server) listClinicWaitlist(w http.ResponseWriter, r *http.Request) error {
	clinicID, q, err := clinicLine.listing(s, r, "doctor_id", "a doctor id", "a patient sees only their own waitlist entries")
	if err != nil {
		return err
	}
	filter := waitlist.ClinicFilter{DoctorID: q.id, GuestID: q.guestID, Status: q.status, Limit: q.limit}
	entries, err := s.cfg.ClinicWaitlist.ListClinicWaitlist(r.Context(), clinicID, filter)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, map[string]any{"clinic_id": clinicID, "entries": entries})
	return nil
}
