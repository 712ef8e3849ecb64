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

type holdAppointmentRequest struct {
	GuestID     string `json:"guest_id"`
	SlotID      string `json:"slot_id,omitempty"`
	DoctorID    string `json:"doctor_id,omitempty"`
	WindowStart string `json:"window_start,omitempty"`
	WindowEnd   string `json:"window_end,omitempty"`
	Channel     string `json:"channel,omitempty"`
	// Where notifications go; optional, as for hotel reservations.
	ContactEmail string `json:"contact_email,omitempty"`
	ContactPhone string `json:"contact_phone,omitempty"`
	// ContactPushToken is the patient app's device token for push (FCM).
	ContactPushToken string `json:"contact_push_token,omitempty"`
}

// parseInstant reads an RFC 3339 instant.
func parseInstant(f *Fields, name, v string) time.Time {
	if v == "" {
		f.Add(name, "required")
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339, v)
	if err != nil {
		f.Add(name, "want an RFC 3339 instant such as 2027-03-01T08:00:00Z")
		return time.Time{}
	}
	return t.UTC()
}

// holdChannel decides the channel of a new appointment: guests use the app
// or the web, staff of the clinic book at the counter, admins anywhere.
func holdChannel(f *Fields, p berth.Principal, asked string) (appointment.Channel, error) {
	ch := appointment.Channel(asked)
	if asked != "" && !appointment.ValidRequestChannel(ch) {
		f.Add("channel", "want app, web or counter")
		return "", nil
	}
	switch p.Role {
	case berth.RoleStaff:
		if asked == "" {
			return appointment.ChannelCounter, nil
		}
		if ch != appointment.ChannelCounter {
			f.Add("channel", "staff book with channel counter")
		}
	case berth.RoleGuest:
		if asked == "" {
			return appointment.ChannelApp, nil
		}
		if ch == appointment.ChannelCounter {
			return "", berth.Errorf(berth.CodeForbidden, "only clinic staff book at the counter")
		}
	default:
		if asked == "" {
			return appointment.ChannelWeb, nil
		}
	}
	return ch, nil
}

func (s *Server) holdAppointment(w http.ResponseWriter, r *http.Request) error {
	clinicID, err := PathID(r, "clinic_id", "clinic")
	if err != nil {
		return err
	}
	p, err := s.requireRole(r, berth.RoleGuest, berth.RoleStaff, berth.RoleAdmin)
	if err != nil {
		return err
	}
	if p.Role == berth.RoleStaff && !p.StaffOf(clinicID) {
		return berth.Errorf(berth.CodeForbidden, "this staff token is not for clinic %s", clinicID)
	}
	if s.cfg.WaitingRoom != nil {
		if err := s.cfg.WaitingRoom.Check(r, clinicID, p.Subject); err != nil {
			return err
		}
	}
	key, err := IdempotencyKey(r)
	if err != nil {
		return err
	}
	var req holdAppointmentRequest
	if err := Decode(w, r, &req); err != nil {
		return err
	}
	var f Fields
	hr := appointment.HoldRequest{
		AppointmentID: uuid.NewString(), ClinicID: clinicID, Actor: actorOf(p),
		GuestID: text(&f, "guest_id", req.GuestID, 128), ContactEmail: req.ContactEmail, ContactPhone: req.ContactPhone,
		ContactPushToken: req.ContactPushToken,
	}
	contactFields(&f, req.ContactEmail, req.ContactPhone)
	pushTokenField(&f, req.ContactPushToken)
	ch, err := holdChannel(&f, p, req.Channel)
	if err != nil {
		return err
	}
	hr.Channel = ch
	byWindow := req.DoctorID != "" || req.WindowStart != "" || req.WindowEnd != ""
	switch {
	case req.SlotID != "" && byWindow:
		f.Add("slot_id", "give slot_id, or doctor_id with window_start and window_end, not both")
	case req.SlotID == "" && !byWindow:
		f.Add("slot_id", "required (or doctor_id with window_start and window_end)")
	case byWindow:
		if req.DoctorID == "" {
			f.Add("doctor_id", "required with a window")
		}
		hr.WindowStart = parseInstant(&f, "window_start", req.WindowStart)
		hr.WindowEnd = parseInstant(&f, "window_end", req.WindowEnd)
		if !hr.WindowStart.IsZero() && !hr.WindowEnd.IsZero() {
			if !hr.WindowStart.Before(hr.WindowEnd) {
				f.Add("window_end", "must be after window_start")
			} else if hr.WindowEnd.Sub(hr.WindowStart) > appointment.MaxSearchWindow {
				f.Add("window_end", "the window may span at most 31 days")
			}
		}
	}
	if err := f.Err(); err != nil {
		return err
	}
	if req.SlotID != "" {
		if !ValidID(req.SlotID) {
			return berth.Errorf(berth.CodeNotFound, "slot %q not found", truncate(req.SlotID, 64))
		}
		hr.SlotID = strings.ToLower(req.SlotID)
	} else {
		if !ValidID(req.DoctorID) {
			return berth.Errorf(berth.CodeNotFound, "doctor %q not found", truncate(req.DoctorID, 64))
		}
		hr.DoctorID = strings.ToLower(req.DoctorID)
	}
	if !p.MayActForGuest(berth.KindClinic, clinicID, hr.GuestID) {
		return berth.Errorf(berth.CodeForbidden, "a guest may book only for themselves")
	}
	resp, err := s.cfg.Clinics.Hold(r.Context(), hr,
		&berth.Idem{Key: key, Hash: RequestHash("clinic-hold:"+clinicID, p.Subject, req), Render: render(http.StatusCreated)})
	if err != nil {
		return err
	}
	if resp, err = s.withPaymentIntent(r.Context(), berth.KindClinic, clinicID, resp); err != nil {
		return err
	}
	writeResponse(w, resp)
	return nil
}

func (s *Server) getAppointment(w http.ResponseWriter, r *http.Request) error {
	return getOwned(s, w, r, berth.KindClinic, "clinic_id", "appointment", s.cfg.Clinics.GetAppointment,
		func(a appointment.Appointment) string { return a.GuestID })
}

// appointmentWrite reads what every appointment transition needs.
func (s *Server) appointmentWrite(r *http.Request) (clinicID, apptID, key string, p berth.Principal, err error) {
	if clinicID, err = PathID(r, "clinic_id", "clinic"); err != nil {
		return
	}
	if apptID, err = PathID(r, "appointment_id", "appointment"); err != nil {
		return
	}
	if p, err = s.requireClinicRole(r, clinicID, berth.RoleGuest, berth.RoleStaff, berth.RoleAdmin); err != nil {
		return
	}
	key, err = IdempotencyKey(r)
	return
}

func (s *Server) confirmAppointment(w http.ResponseWriter, r *http.Request) error {
	clinicID, apptID, key, p, err := s.appointmentWrite(r)
	if err != nil {
		return err
	}
	var req confirmRequest
	if err := Decode(w, r, &req); err != nil {
		return err
	}
	var f Fields
	req.PaymentRef = text(&f, "payment_ref", req.PaymentRef, payments.MaxRefLen)
	if err := f.Err(); err != nil {
		return err
	}
	pay, err := s.appointmentPayment(r.Context(), p, clinicID, apptID, req.PaymentRef)
	if err != nil {
		return err
	}
	idem := &berth.Idem{Key: key, Hash: RequestHash("clinic-confirm:"+apptID, p.Subject, req), Render: render(http.StatusOK)}
	resp, err := s.cfg.Clinics.Confirm(r.Context(), clinicID, apptID, pay, forGuest(p, berth.KindClinic, clinicID),
		actorOf(p), staffChannel(p), idem)
	if err != nil {
		return err
	}
	writeResponse(w, resp)
	return nil
}

// appointmentPayment is hotelPayment for appointments: staff of the clinic
// and admins confirm money taken at the desk; a guest's payment_ref must be
// a succeeded payment for exactly this appointment's price.
func (s *Server) appointmentPayment(ctx context.Context, p berth.Principal, clinicID, apptID, ref string) (payments.Payment, error) {
	if p.Role != berth.RoleGuest {
		return deskPayment(p, ref), nil
	}
	a, err := s.cfg.Clinics.GetAppointment(ctx, clinicID, apptID)
	if err != nil {
		return payments.Payment{}, err
	}
	if err := forGuest(p, berth.KindClinic, clinicID)(a.GuestID); err != nil {
		return payments.Payment{}, err
	}
	if c := appointment.OnConfirm(a.Status); c == appointment.ConfirmAlready || c == appointment.ConfirmRefuse {
		// As for hotels: answered as it is, no payment needed.
		return payments.Payment{Ref: ref, Method: payments.MethodNone, ActorSubject: p.Subject, ActorRole: string(p.Role)}, nil
	}
	due := payments.Due{Kind: string(berth.KindClinic), PartitionID: clinicID, ReservationID: a.ID, Currency: a.Currency}
	if a.PriceCents != nil {
		due.AmountCents = *a.PriceCents
	}
	return s.guestPayment(ctx, p, ref, due, a.PriceCents != nil)
}

func (s *Server) cancelAppointment(w http.ResponseWriter, r *http.Request) error {
	clinicID, apptID, key, p, err := s.appointmentWrite(r)
	if err != nil {
		return err
	}
	if err := decodeOptional(w, r, &struct{}{}); err != nil {
		return err
	}
	idem := &berth.Idem{Key: key, Hash: RequestHash("clinic-cancel:"+apptID, p.Subject, nil), Render: render(http.StatusOK)}
	resp, err := s.cfg.Clinics.Cancel(r.Context(), clinicID, apptID, forGuest(p, berth.KindClinic, clinicID), actorOf(p), staffChannel(p), idem)
	if err != nil {
		return err
	}
	writeResponse(w, resp)
	return nil
}

type rescheduleRequest struct {
	SlotID string `json:"slot_id"`
}

func (s *Server) rescheduleAppointment(w http.ResponseWriter, r *http.Request) error {
	clinicID, apptID, key, p, err := s.appointmentWrite(r)
	if err != nil {
		return err
	}
	var req rescheduleRequest
	if err := Decode(w, r, &req); err != nil {
		return err
	}
	if req.SlotID == "" {
		return berth.Invalid(berth.FieldError{Field: "slot_id", Message: "required"})
	}
	if !ValidID(req.SlotID) {
		return berth.Errorf(berth.CodeNotFound, "slot %q not found", truncate(req.SlotID, 64))
	}
	idem := &berth.Idem{Key: key, Hash: RequestHash("clinic-reschedule:"+apptID, p.Subject, req), Render: render(http.StatusOK)}
	resp, err := s.cfg.Clinics.Reschedule(r.Context(), clinicID, apptID, strings.ToLower(req.SlotID), forGuest(p, berth.KindClinic, clinicID),
		actorOf(p), staffChannel(p), idem)
	if err != nil {
		return err
	}
	writeResponse(w, resp)
	return nil
}

// pushTokenField checks the optional device token of a hold (a reservation
// or an appointment): an FCM registration token is some hundred characters
// of letters, digits and ":_-."; anything else (spaces, other bytes, a
// kilobyte or more) is refused before it reaches a provider.
func pushTokenField(f *Fields, token string) {
	if token == "" {
		return
	}
	if len(token) > 1024 {
		f.Add("contact_push_token", "at most 1024 characters")
		return
	}
	for _, c := range token {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == ':' || c == '_' || c == '-' || c == '.'
		if !ok {
			f.Add("contact_push_token", "want a device token (letters, digits, ':', '_', '-', '.')")
			return
		}
	}
}
