package httpapi

import (
	"net/http"
	"strings"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/google/uuid"
)

// Walks at the front desk (role admin, as for check-in): the options for a
// guest no room of the booked type is free for, an upgrade within the
// hotel, and a relocation to a sister hotel (docs/adr/0012-walks.md).

func (s *Server) walkRoutes() {
	s.mux.HandleFunc("GET /v1/hotels/{hotel_id}/reservations/{reservation_id}/walk-options", s.handle(s.walkOptions))
	s.mux.HandleFunc("POST /v1/hotels/{hotel_id}/reservations/{reservation_id}/upgrade", s.handle(s.upgrade))
	s.mux.HandleFunc("POST /v1/hotels/{hotel_id}/reservations/{reservation_id}/relocate", s.handle(s.relocate))
}

func (s *Server) walkOptions(w http.ResponseWriter, r *http.Request) error {
	hotelID, resID, _, err := s.hotelAdminPath(r, "reservation_id", "reservation")
	if err != nil {
		return err
	}
	if len(r.URL.Query()) > 0 {
		return &berth.Error{Code: berth.CodeInvalidRequest, Detail: "no query parameters are taken here"}
	}
	opts, err := s.cfg.Stays.WalkOptions(r.Context(), hotelID, resID)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, map[string]any{"hotel_id": hotelID, "reservation_id": resID, "options": opts})
	return nil
}

type upgradeRequest struct {
	RoomTypeID string   `json:"room_type_id"`
	RoomIDs    []string `json:"room_ids"`
}

func (s *Server) upgrade(w http.ResponseWriter, r *http.Request) error {
	hotelID, resID, key, p, err := deskPath(s, r)
	if err != nil {
		return err
	}
	var req upgradeRequest
	if err := Decode(w, r, &req); err != nil {
		return err
	}
	var f Fields
	req.RoomTypeID = strings.ToLower(req.RoomTypeID)
	if !ValidID(req.RoomTypeID) {
		f.Add("room_type_id", "want a room type id")
	}
	checkRoomIDs(&f, req.RoomIDs)
	if err := f.Err(); err != nil {
		return err
	}
	idem := &berth.Idem{Key: key, Hash: RequestHash("upgrade:"+resID, p.Subject, req), Render: render(http.StatusOK)}
	resp, err := s.cfg.Stays.Upgrade(r.Context(), hotelID, resID, req.RoomTypeID, req.RoomIDs, idem)
	if err != nil {
		return err
	}
	// The booked type's nights came back.
	s.invalidateHotel(r.Context(), hotelID)
	writeResponse(w, resp)
	return nil
}

type relocateRequest struct {
	HotelID    string `json:"hotel_id"`
	RoomTypeID string `json:"room_type_id"`
}

// relocate starts the relocation saga and answers 202: the stay is walking
// until the sister hotel has answered (GET the reservation, or its events).
func (s *Server) relocate(w http.ResponseWriter, r *http.Request) error {
	hotelID, resID, key, p, err := deskPath(s, r)
	if err != nil {
		return err
	}
	var req relocateRequest
	if err := Decode(w, r, &req); err != nil {
		return err
	}
	var f Fields
	req.HotelID, req.RoomTypeID = strings.ToLower(req.HotelID), strings.ToLower(req.RoomTypeID)
	if !ValidID(req.HotelID) {
		f.Add("hotel_id", "want the id of the sister hotel")
	}
	if req.RoomTypeID != "" && !ValidID(req.RoomTypeID) {
		f.Add("room_type_id", "want a room type id of the sister hotel")
	}
	if err := f.Err(); err != nil {
		return err
	}
	// The walk id (the id of the stay the sister hotel will hold) is made
	// before the transaction, which may run more than once.
	walkID := uuid.NewString()
	idem := &berth.Idem{Key: key, Hash: RequestHash("relocate:"+resID, p.Subject, req), Render: render(http.StatusAccepted)}
	resp, err := s.cfg.Stays.Relocate(r.Context(), hotelID, resID, req.HotelID, req.RoomTypeID, walkID, idem)
	if err != nil {
		return err
	}
	writeResponse(w, resp)
	return nil
}

// checkRoomIDs checks the rooms a desk picked: distinct ids, at most one
// per room a reservation may hold; it lower-cases them in place.
func checkRoomIDs(f *Fields, ids []string) {
	if len(ids) > reservation.MaxQuantity {
		f.Add("room_ids", "at most 50")
	}
	seen := map[string]bool{}
	for i, id := range ids {
		id = strings.ToLower(id)
		if !ValidID(id) || seen[id] {
			f.Add("room_ids", "want distinct room ids")
			break
		}
		seen[id], ids[i] = true, id
	}
}
