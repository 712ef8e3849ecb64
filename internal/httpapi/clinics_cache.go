package httpapi

import (
	"context"
	"net/http"

	"github.com/berthhq/berth/internal/appointment"
	"github.com/berthhq/berth/internal/berth"
)

// invalidatesClinic wraps a clinic write: once it answered below 500 (a
// success, or a 409 that may have committed, such as hold_expired), the
// clinic's cached reads of this region are dropped at once. Other regions'
// caches follow through the event stream; the TTL bounds anything missed.
func (s *Server) invalidatesClinic(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		h(rec, r)
		if s.cfg.Cache == nil || rec.status >= 500 {
			return
		}
		id := r.PathValue("clinic_id")
		if !ValidID(id) {
			return
		}
		if err := s.cfg.Cache.Invalidate(context.WithoutCancel(r.Context()), string(berth.KindClinic), id); err != nil {
			s.log.WarnContext(r.Context(), "invalidate clinic cache", "clinic_id", id, "err", err)
		}
	}
}

// statusRecorder remembers the status a handler wrote.
type statusRecorder struct {
	http.ResponseWriter
	status int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *statusRecorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// slotsName is the cache name of a doctor's slot list of one local day.
func slotsName(doctorID string, day appointment.Date) string {
	return "slots:" + doctorID + ":" + day.String()
}

// SlotLister reads a doctor's slots of one local day.
type SlotLister interface {
	ListSlots(ctx context.Context, clinicID, doctorID string, day appointment.Date) (appointment.SlotList, error)
}

// WarmSlots loads a doctor's slot list of one day into the cache under the
// very key and encoding the slot route reads (`booking cache warm --clinic`).
// It reports whether the entry was there already.
func WarmSlots(ctx context.Context, c Cache, clinics SlotLister, clinicID, doctorID string, day appointment.Date) (bool, error) {
	_, hit, err := fetchJSON(ctx, c, string(berth.KindClinic), clinicID, slotsName(doctorID, day), 0,
		func(ctx context.Context) (any, error) { return clinics.ListSlots(ctx, clinicID, doctorID, day) })
	return hit, err
}
