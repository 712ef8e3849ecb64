package httpapi

import (
	"context"
	"encoding/json"
	"net/http"

	"github.com/berthhq/berth/internal/appointment"
	"github.com/berthhq/berth/internal/berth"
)

// invalidatesClinic wraps a clinic write: once it answered with anything
// but a refusal that took or freed no slot (keptSlots), the clinic's cached
// reads of this region are dropped at once. Other regions' caches follow
// through the event stream; the TTL bounds anything missed.
func (s *Server) invalidatesClinic(h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		rec := &statusRecorder{ResponseWriter: w, status: http.StatusOK}
		h(rec, r)
		if s.cfg.Cache == nil || rec.status >= 500 || keptSlots(rec.status, rec.conflict) {
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

// keptSlots reports whether a clinic write's answer is a refusal that
// changed no slot, so the clinic's cached slot lists (the only clinic reads
// the cache holds) are still right: a 409 slot_taken (the herd's answer at
// an opening — the slot was someone else's before and after), or a 4xx
// other than 402 and 409, which no write commits with (the request was
// refused before its transaction, or the transaction rolled back). Any
// other answer drops them: a 2xx, and a 409 or 402 that may have committed
// (a confirm that lost its lapsed hold frees the slot and answers
// hold_expired). A 409 whose code cannot be read counts as committed.
func keptSlots(status int, conflict []byte) bool {
	switch {
	case status == http.StatusConflict:
		var p struct {
			Code berth.Code `json:"code"`
		}
		return json.Unmarshal(conflict, &p) == nil && p.Code == berth.CodeSlotTaken
	case status == http.StatusPaymentRequired:
		return false
	}
	return status >= 400 && status < 500
}

// statusRecorder remembers the status a handler wrote, and the body of a
// 409 for its code (none when longer than maxConflictBody).
type statusRecorder struct {
	http.ResponseWriter
	status   int
	conflict []byte
	tooLong  bool
}

// maxConflictBody bounds what statusRecorder keeps of a 409's body: a
// problem document with its alternatives is far smaller; a longer one is
// not kept, and keptSlots then drops the cache.
const maxConflictBody = 16 << 10

func (r *statusRecorder) WriteHeader(code int) {
	r.status = code
	r.ResponseWriter.WriteHeader(code)
}

func (r *statusRecorder) Write(b []byte) (int, error) {
	if r.status == http.StatusConflict && !r.tooLong {
		r.conflict = append(r.conflict, b...)
		if len(r.conflict) > maxConflictBody {
			r.conflict, r.tooLong = nil, true
		}
	}
	return r.ResponseWriter.Write(b)
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
