package httpapi

import (
	"context"
	"net/http"
	"strings"
	"time"

	"github.com/berthhq/berth/internal/appointment"
	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/payments"
	"github.com/google/uuid"
)

// ClinicStore is what the clinic routes (API.md, Clinics) need from the store.
type ClinicStore interface {
	CreateClinic(ctx context.Context, c appointment.Clinic) (appointment.Clinic, error)
	GetClinicDetail(ctx context.Context, clinicID string) (appointment.ClinicDetail, error)
	CreateDoctor(ctx context.Context, d appointment.Doctor) (appointment.Doctor, error)
	Materialize(ctx context.Context, clinicID string, from, to appointment.Date) (int, error)
	ListSlots(ctx context.Context, clinicID, doctorID string, day appointment.Date) (appointment.SlotList, error)
	SlotAudit(ctx context.Context, clinicID, slotID string) ([]appointment.AuditEvent, error)
	BlockSlot(ctx context.Context, clinicID, slotID string, actor appointment.Actor, ch appointment.Channel, idem *berth.Idem) (berth.Response, error)
	Hold(ctx context.Context, req appointment.HoldRequest, idem *berth.Idem) (berth.Response, error)
	GetAppointment(ctx context.Context, clinicID, apptID string) (appointment.Appointment, error)
	Confirm(ctx context.Context, clinicID, apptID string, pay payments.Payment, authorize func(guestID string) error,
		actor appointment.Actor, ch appointment.Channel, idem *berth.Idem) (berth.Response, error)
	Cancel(ctx context.Context, clinicID, apptID string, authorize func(guestID string) error,
		actor appointment.Actor, ch appointment.Channel, idem *berth.Idem) (berth.Response, error)
	Reschedule(ctx context.Context, clinicID, apptID, newSlotID string, authorize func(guestID string) error,
		actor appointment.Actor, ch appointment.Channel, idem *berth.Idem) (berth.Response, error)
	// The reception (clinics_visits.go).
	Arrive(ctx context.Context, clinicID, apptID string, idem *berth.Idem) (berth.Response, error)
	Complete(ctx context.Context, clinicID, apptID string, idem *berth.Idem) (berth.Response, error)
	DayList(ctx context.Context, clinicID, doctorID string, day appointment.Date) ([]appointment.Appointment, error)
}

// clinicRoutes registers the clinic routes (API.md, Clinics).
func (s *Server) clinicRoutes() {
	s.mux.HandleFunc("POST /v1/clinics", s.handle(s.createClinic))
	s.mux.HandleFunc("GET /v1/clinics/{clinic_id}", s.handle(s.getClinic))
	s.mux.HandleFunc("POST /v1/clinics/{clinic_id}/doctors", s.invalidatesClinic(s.handle(s.createDoctor)))
	s.mux.HandleFunc("POST /v1/clinics/{clinic_id}/slots/materialize", s.invalidatesClinic(s.handle(s.materialize)))
	s.mux.HandleFunc("POST /v1/clinics/{clinic_id}/slots/{slot_id}/block", s.invalidatesClinic(s.handle(s.blockSlot)))
	s.mux.HandleFunc("GET /v1/clinics/{clinic_id}/slots/{slot_id}/audit", s.handle(s.slotAudit))
	s.mux.HandleFunc("GET /v1/clinics/{clinic_id}/doctors/{doctor_id}/slots", s.handle(s.listSlots))
	s.mux.HandleFunc("POST /v1/clinics/{clinic_id}/appointments", s.invalidatesClinic(s.handle(s.holdAppointment)))
	s.mux.HandleFunc("GET /v1/clinics/{clinic_id}/appointments/{appointment_id}", s.handle(s.getAppointment))
	s.mux.HandleFunc("POST /v1/clinics/{clinic_id}/appointments/{appointment_id}/confirm", s.invalidatesClinic(s.handle(s.confirmAppointment)))
	s.mux.HandleFunc("POST /v1/clinics/{clinic_id}/appointments/{appointment_id}/cancel", s.invalidatesClinic(s.handle(s.cancelAppointment)))
	s.mux.HandleFunc("POST /v1/clinics/{clinic_id}/appointments/{appointment_id}/reschedule", s.invalidatesClinic(s.handle(s.rescheduleAppointment)))
	s.mux.HandleFunc("POST /v1/clinics/{clinic_id}/appointments/{appointment_id}/arrive", s.handle(s.arriveAppointment))
	s.mux.HandleFunc("POST /v1/clinics/{clinic_id}/appointments/{appointment_id}/complete", s.handle(s.completeAppointment))
	s.mux.HandleFunc("GET /v1/clinics/{clinic_id}/doctors/{doctor_id}/appointments", s.handle(s.doctorDayList))
}

type createClinicRequest struct {
	Name       string `json:"name"`
	Timezone   string `json:"timezone"`
	HomeRegion string `json:"home_region"`
}

// validTimezone reports whether tz names an IANA zone (not "Local").
func validTimezone(tz string) bool {
	if tz == "" || tz == "Local" {
		return false
	}
	_, err := time.LoadLocation(tz)
	return err == nil
}

func (s *Server) createClinic(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.requireRole(r, berth.RoleAdmin); err != nil {
		return err
	}
	var req createClinicRequest
	if err := Decode(w, r, &req); err != nil {
		return err
	}
	var f Fields
	c := appointment.Clinic{
		ID:         uuid.NewString(),
		Name:       text(&f, "name", req.Name, 200),
		Timezone:   text(&f, "timezone", req.Timezone, 64),
		HomeRegion: req.HomeRegion,
	}
	if c.Timezone != "" && !validTimezone(c.Timezone) {
		f.Add("timezone", "unknown IANA time zone")
	}
	if !berth.ValidRegion(c.HomeRegion) {
		f.Add("home_region", "want one of "+strings.Join(berth.Regions(), ", "))
	}
	if err := f.Err(); err != nil {
		return err
	}
	c, err := s.cfg.Clinics.CreateClinic(r.Context(), c)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/clinics/"+c.ID)
	WriteJSON(w, http.StatusCreated, c)
	return nil
}

func (s *Server) getClinic(w http.ResponseWriter, r *http.Request) error {
	id, err := PathID(r, "clinic_id", "clinic")
	if err != nil {
		return err
	}
	c, err := s.cfg.Clinics.GetClinicDetail(r.Context(), id)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, c)
	return nil
}

type createDoctorRequest struct {
	Name           string               `json:"name"`
	SlotMinutes    int                  `json:"slot_minutes"`
	PrepayRequired bool                 `json:"prepay_required"`
	PriceCents     *int64               `json:"price_cents,omitempty"`
	Currency       string               `json:"currency,omitempty"`
	Weekly         []appointment.Window `json:"weekly"`
}

func (s *Server) createDoctor(w http.ResponseWriter, r *http.Request) error {
	var req createDoctorRequest
	clinicID, err := s.adminWrite(w, r, "clinic_id", "clinic", &req)
	if err != nil {
		return err
	}
	var f Fields
	d := appointment.Doctor{
		ID: uuid.NewString(), ClinicID: clinicID, Name: text(&f, "name", req.Name, 200),
		SlotMinutes: req.SlotMinutes, PrepayRequired: req.PrepayRequired, Weekly: req.Weekly,
		PriceCents: req.PriceCents, Currency: req.Currency,
	}
	// A price is optional (without one a prepaid appointment is paid at the
	// desk) but comes whole: amount and currency together.
	if req.PriceCents != nil && (*req.PriceCents < 0 || *req.PriceCents > 100_000_000_00) {
		f.Add("price_cents", "want 0 to 10000000000")
	}
	if (req.PriceCents != nil) != (req.Currency != "") {
		f.Add("currency", "give price_cents and currency together")
	} else if req.Currency != "" && !validCurrency(req.Currency) {
		f.Add("currency", "want an ISO 4217 code such as EUR")
	}
	for _, e := range appointment.ValidateTemplate(req.SlotMinutes, req.Weekly) {
		f.Add(e.Field, e.Message)
	}
	if err := f.Err(); err != nil {
		return err
	}
	d, err = s.cfg.Clinics.CreateDoctor(r.Context(), d)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusCreated, d)
	return nil
}

type materializeRequest struct {
	From string `json:"from"`
	To   string `json:"to"`
}

func (s *Server) materialize(w http.ResponseWriter, r *http.Request) error {
	var req materializeRequest
	clinicID, err := s.adminWrite(w, r, "clinic_id", "clinic", &req)
	if err != nil {
		return err
	}
	var f Fields
	from, errFrom := appointment.ParseDate(req.From)
	if errFrom != nil {
		f.Add("from", errFrom.Error())
	}
	to, errTo := appointment.ParseDate(req.To)
	if errTo != nil {
		f.Add("to", errTo.Error())
	}
	if errFrom == nil && errTo == nil {
		if !from.Before(to) {
			f.Add("to", "must be after from (the days [from, to) are materialized)")
		} else if from.DaysUntil(to) > appointment.MaxMaterializeDays {
			f.Add("to", "at most 366 days per request")
		}
	}
	if err := f.Err(); err != nil {
		return err
	}
	n, err := s.cfg.Clinics.Materialize(r.Context(), clinicID, from, to)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, map[string]any{"clinic_id": clinicID, "from": from, "to": to, "created": n})
	return nil
}

// actorOf is the audit identity of a principal.
func actorOf(p berth.Principal) appointment.Actor {
	return appointment.Actor{Subject: p.Subject, Role: string(p.Role)}
}

// requireClinicStaff admits staff of the clinic and admins.
func (s *Server) requireClinicStaff(r *http.Request, clinicID string) (berth.Principal, error) {
	return s.requireClinicRole(r, clinicID, berth.RoleStaff, berth.RoleAdmin)
}

// clinicStaffPath reads a staff route under a clinic: the clinic's path id,
// the child's (param, named what in the 404), then a token of the clinic's
// staff or an admin — in that order, so bad ids are 404s whatever the token.
func (s *Server) clinicStaffPath(r *http.Request, param, what string) (clinicID, childID string, p berth.Principal, err error) {
	if clinicID, err = PathID(r, "clinic_id", "clinic"); err != nil {
		return
	}
	if childID, err = PathID(r, param, what); err != nil {
		return
	}
	p, err = s.requireClinicStaff(r, clinicID)
	return
}

// requireClinicRole admits a token of one of roles, a staff token only for
// its own clinic.
func (s *Server) requireClinicRole(r *http.Request, clinicID string, roles ...berth.Role) (berth.Principal, error) {
	p, err := s.requireRole(r, roles...)
	if err != nil {
		return p, err
	}
	if p.Role == berth.RoleStaff && !p.StaffOf(clinicID) {
		return p, berth.Errorf(berth.CodeForbidden, "this staff token is not for clinic %s", clinicID)
	}
	return p, nil
}

// staffChannel is the audit channel of a change made without one named:
// staff act at the counter; others keep the appointment's own channel ("").
func staffChannel(p berth.Principal) appointment.Channel {
	if p.Role == berth.RoleStaff {
		return appointment.ChannelCounter
	}
	return ""
}

func (s *Server) blockSlot(w http.ResponseWriter, r *http.Request) error {
	clinicID, slotID, p, err := s.clinicStaffPath(r, "slot_id", "slot")
	if err != nil {
		return err
	}
	if err := decodeOptional(w, r, &struct{}{}); err != nil {
		return err
	}
	// The key is optional here (blocking is idempotent by itself).
	var idem *berth.Idem
	if r.Header.Get("Idempotency-Key") != "" {
		key, err := IdempotencyKey(r)
		if err != nil {
			return err
		}
		idem = &berth.Idem{Key: key, Hash: RequestHash("clinic-block:"+slotID, p.Subject, nil), Render: render(http.StatusOK)}
	}
	ch := appointment.ChannelCounter
	if p.Role != berth.RoleStaff {
		ch = appointment.ChannelWeb
	}
	resp, err := s.cfg.Clinics.BlockSlot(r.Context(), clinicID, slotID, actorOf(p), ch, idem)
	if err != nil {
		return err
	}
	if idem == nil {
		WriteJSON(w, http.StatusOK, resp.Value)
		return nil
	}
	writeResponse(w, resp)
	return nil
}

func (s *Server) slotAudit(w http.ResponseWriter, r *http.Request) error {
	clinicID, slotID, _, err := s.clinicStaffPath(r, "slot_id", "slot")
	if err != nil {
		return err
	}
	events, err := s.cfg.Clinics.SlotAudit(r.Context(), clinicID, slotID)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, map[string]any{"clinic_id": clinicID, "slot_id": slotID, "events": events})
	return nil
}

func (s *Server) listSlots(w http.ResponseWriter, r *http.Request) error {
	clinicID, err := PathID(r, "clinic_id", "clinic")
	if err != nil {
		return err
	}
	doctorID, err := PathID(r, "doctor_id", "doctor")
	if err != nil {
		return err
	}
	day, err := dayParam(r)
	if err != nil {
		return err
	}
	// Seconds-stale slot lists are fine (a hold decides in the database);
	// clinic writes invalidate them, and the TTL bounds what is missed.
	return s.cachedRead(w, r, string(berth.KindClinic), clinicID, slotsName(doctorID, day), 0,
		func(ctx context.Context) (any, error) { return s.cfg.Clinics.ListSlots(ctx, clinicID, doctorID, day) })
}
