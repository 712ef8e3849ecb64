package httpapi

import (
	"net/http"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/reservation"
)

// The front desk of a hotel: arrivals, check-in, check-out (role admin,
// as for the hotel's rooms: rooms.go).

func (s *Server) arrivals(w http.ResponseWriter, r *http.Request) error {
	hotelID, err := PathID(r, "hotel_id", "hotel")
	if err != nil {
		return err
	}
	if _, err := s.requireRole(r, berth.RoleAdmin); err != nil {
		return err
	}
	day, err := dayParam(r)
	if err != nil {
		return err
	}
	list, err := s.cfg.Stays.Arrivals(r.Context(), hotelID, day)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, map[string]any{"hotel_id": hotelID, "date": day, "arrivals": list})
	return nil
}

type checkInRequest struct {
	RoomIDs []string `json:"room_ids"`
}

// deskPath reads the hotel and reservation of a desk action by an admin,
// and its Idempotency-Key.
func deskPath(s *Server, r *http.Request) (hotelID, resID, key string, p berth.Principal, err error) {
	if hotelID, resID, p, err = s.hotelAdminPath(r, "reservation_id", "reservation"); err != nil {
		return
	}
	key, err = IdempotencyKey(r)
	return
}

func (s *Server) checkIn(w http.ResponseWriter, r *http.Request) error {
	hotelID, resID, key, p, err := deskPath(s, r)
	if err != nil {
		return err
	}
	var req checkInRequest
	if err := decodeOptional(w, r, &req); err != nil {
		return err
	}
	var f Fields
	checkRoomIDs(&f, req.RoomIDs)
	if err := f.Err(); err != nil {
		return err
	}
	idem := &berth.Idem{Key: key, Hash: RequestHash("check-in:"+resID, p.Subject, req), Render: render(http.StatusOK)}
	resp, err := s.cfg.Stays.CheckIn(r.Context(), hotelID, resID, req.RoomIDs, idem)
	if err != nil {
		return err
	}
	writeResponse(w, resp)
	return nil
}

func (s *Server) checkOut(w http.ResponseWriter, r *http.Request) error {
	hotelID, resID, key, p, err := deskPath(s, r)
	if err != nil {
		return err
	}
	if err := decodeOptional(w, r, &struct{}{}); err != nil {
		return err
	}
	idem := &berth.Idem{Key: key, Hash: RequestHash("check-out:"+resID, p.Subject, nil), Render: render(http.StatusOK)}
	resp, err := s.cfg.Stays.CheckOut(r.Context(), hotelID, resID, idem)
	if err != nil {
		return err
	}
	// An early departure gave nights back.
	s.invalidateHotel(r.Context(), hotelID)
	writeResponse(w, resp)
	return nil
}

// dayParam reads the query of a list of one day (the front desk's arrivals,
// a doctor's slots): `date=YYYY-MM-DD` and nothing else.
func dayParam(r *http.Request) (reservation.Date, error) {
	q := r.URL.Query()
	var f Fields
	for k := range q {
		if k != "date" {
			f.Add(k, "unknown query parameter")
		}
	}
	day, err := reservation.ParseDate(q.Get("date"))
	if err != nil {
		f.Add("date", err.Error())
	}
	return day, f.Err()
}
