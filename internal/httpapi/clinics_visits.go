package httpapi

import (
	"context"
	"net/http"

	"github.com/berthhq/berth/internal/berth"
)

// The clinic's reception (API.md, Clinics → Reception): staff of the clinic
// or admins mark patients arrived and visits completed, and read a doctor's
// day. The no-show job marks the rest (postgres.ClinicStore.MarkNoShows).
// None of these touch a slot's availability (a visit keeps its slot
// booked), so the public slot cache is left as it is.

// visitPath reads the clinic and appointment of a reception action by
// staff of that clinic or an admin, and its Idempotency-Key.
func (s *Server) visitPath(r *http.Request) (clinicID, apptID, key string, p berth.Principal, err error) {
	if clinicID, apptID, p, err = s.clinicStaffPath(r, "appointment_id", "appointment"); err != nil {
		return
	}
	key, err = IdempotencyKey(r)
	return
}

// visitAction answers a reception action: an optional empty body, then the
// store's transition under the request's key.
func (s *Server) visitAction(w http.ResponseWriter, r *http.Request, name string,
	do func(ctx context.Context, clinicID, apptID string, idem *berth.Idem) (berth.Response, error)) error {
	clinicID, apptID, key, p, err := s.visitPath(r)
	if err != nil {
		return err
	}
	if err := decodeOptional(w, r, &struct{}{}); err != nil {
		return err
	}
	idem := &berth.Idem{Key: key, Hash: RequestHash(name+":"+apptID, p.Subject, nil), Render: render(http.StatusOK)}
	resp, err := do(r.Context(), clinicID, apptID, idem)
	if err != nil {
		return err
	}
	writeResponse(w, resp)
	return nil
}

func (s *Server) arriveAppointment(w http.ResponseWriter, r *http.Request) error {
	return s.visitAction(w, r, "clinic-arrive", s.cfg.Clinics.Arrive)
}

func (s *Server) completeAppointment(w http.ResponseWriter, r *http.Request) error {
	return s.visitAction(w, r, "clinic-complete", s.cfg.Clinics.Complete)
}

// doctorDayList is the reception's list of a doctor's appointments on one
// day of the clinic, with each patient's status and contact data.
func (s *Server) doctorDayList(w http.ResponseWriter, r *http.Request) error {
	clinicID, doctorID, _, err := s.clinicStaffPath(r, "doctor_id", "doctor")
	if err != nil {
		return err
	}
	day, err := dayParam(r)
	if err != nil {
		return err
	}
	list, err := s.cfg.Clinics.DayList(r.Context(), clinicID, doctorID, day)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, map[string]any{"clinic_id": clinicID, "doctor_id": doctorID, "date": day, "appointments": list})
	return nil
}
