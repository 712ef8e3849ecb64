package httpapi

import (
	"context"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/google/uuid"
)

// StayStore is what the front-desk routes need from the database: a
// hotel's physical rooms, and a stay from check-in to check-out.
type StayStore interface {
	CreateRoom(ctx context.Context, rm reservation.Room) (reservation.Room, error)
	ListRooms(ctx context.Context, hotelID, roomTypeID string) ([]reservation.Room, error)
	SetOutOfOrder(ctx context.Context, hotelID, roomID string, from, to reservation.Date, reason string, out bool) (reservation.Room, error)
	CheckIn(ctx context.Context, hotelID, reservationID string, roomIDs []string, idem *berth.Idem) (berth.Response, error)
	CheckOut(ctx context.Context, hotelID, reservationID string, idem *berth.Idem) (berth.Response, error)
	Arrivals(ctx context.Context, hotelID string, day reservation.Date) ([]reservation.Reservation, error)
	// Walks (walks.go).
	WalkOptions(ctx context.Context, hotelID, reservationID string) (reservation.WalkOptions, error)
	Upgrade(ctx context.Context, hotelID, reservationID, roomTypeID string, roomIDs []string, idem *berth.Idem) (berth.Response, error)
	Relocate(ctx context.Context, hotelID, reservationID, toHotelID, roomTypeID, walkID string, idem *berth.Idem) (berth.Response, error)
}

// The front desk of a hotel is an admin's (API.md): the contract gives hotel
// staff no role at a hotel, so these routes do not either.
func (s *Server) roomRoutes() {
	s.mux.HandleFunc("POST /v1/hotels/{hotel_id}/rooms", s.handle(s.createRoom))
	s.mux.HandleFunc("GET /v1/hotels/{hotel_id}/rooms", s.handle(s.listRooms))
	s.mux.HandleFunc("POST /v1/hotels/{hotel_id}/rooms/{room_id}/out-of-order", s.handle(s.outOfOrder))
	s.mux.HandleFunc("DELETE /v1/hotels/{hotel_id}/rooms/{room_id}/out-of-order", s.handle(s.backInOrder))
	s.mux.HandleFunc("GET /v1/hotels/{hotel_id}/arrivals", s.handle(s.arrivals))
	s.mux.HandleFunc("POST /v1/hotels/{hotel_id}/reservations/{reservation_id}/check-in", s.handle(s.checkIn))
	s.mux.HandleFunc("POST /v1/hotels/{hotel_id}/reservations/{reservation_id}/check-out", s.handle(s.checkOut))
	s.walkRoutes()
}

// invalidateHotel drops the hotel's cached reads after a write that changed
// what can be sold; the TTL bounds staleness when it fails.
func (s *Server) invalidateHotel(ctx context.Context, hotelID string) {
	if s.cfg.Cache == nil {
		return
	}
	if err := s.cfg.Cache.Invalidate(context.WithoutCancel(ctx), string(berth.KindHotel), hotelID); err != nil {
		s.log.DebugContext(ctx, "cache invalidation after write failed; TTL bounds staleness", "err", err)
	}
}

type createRoomRequest struct {
	RoomTypeID string   `json:"room_type_id"`
	Number     string   `json:"number"`
	Floor      *int     `json:"floor"`
	Features   []string `json:"features"`
}

func (s *Server) createRoom(w http.ResponseWriter, r *http.Request) error {
	var req createRoomRequest
	hotelID, err := s.adminWrite(w, r, "hotel_id", "hotel", &req)
	if err != nil {
		return err
	}
	var f Fields
	rm := reservation.Room{ID: uuid.NewString(), HotelID: hotelID, RoomTypeID: strings.ToLower(req.RoomTypeID),
		Number: text(&f, "number", req.Number, 16), Floor: required(&f, "floor", req.Floor), Features: []string{}}
	if req.RoomTypeID == "" {
		f.Add("room_type_id", "required")
	}
	if req.Floor != nil && (rm.Floor < -20 || rm.Floor > 300) {
		f.Add("floor", "want -20 to 300")
	}
	if len(req.Features) > 20 {
		f.Add("features", "at most 20")
	}
	for _, ft := range req.Features {
		ft = strings.TrimSpace(ft)
		if ft == "" || utf8.RuneCountInString(ft) > 64 {
			f.Add("features", "each 1 to 64 characters")
			break
		}
		rm.Features = append(rm.Features, ft)
	}
	if err := f.Err(); err != nil {
		return err
	}
	if !ValidID(rm.RoomTypeID) {
		return berth.Errorf(berth.CodeNotFound, "room type not found")
	}
	rm, err = s.cfg.Stays.CreateRoom(r.Context(), rm)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusCreated, rm)
	return nil
}

func (s *Server) listRooms(w http.ResponseWriter, r *http.Request) error {
	hotelID, err := PathID(r, "hotel_id", "hotel")
	if err != nil {
		return err
	}
	if _, err := s.requireRole(r, berth.RoleAdmin); err != nil {
		return err
	}
	q := r.URL.Query()
	var f Fields
	for k := range q {
		if k != "room_type_id" {
			f.Add(k, "unknown query parameter")
		}
	}
	if err := f.Err(); err != nil {
		return err
	}
	roomTypeID := q.Get("room_type_id")
	if roomTypeID != "" && !ValidID(roomTypeID) {
		return berth.Errorf(berth.CodeNotFound, "room type not found")
	}
	rooms, err := s.cfg.Stays.ListRooms(r.Context(), hotelID, strings.ToLower(roomTypeID))
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, map[string]any{"hotel_id": hotelID, "rooms": rooms})
	return nil
}

type outOfOrderRequest struct {
	From   string `json:"from"`
	To     string `json:"to"`
	Reason string `json:"reason"`
}

func (s *Server) outOfOrder(w http.ResponseWriter, r *http.Request) error {
	hotelID, roomID, err := roomPath(s, r)
	if err != nil {
		return err
	}
	var req outOfOrderRequest
	if err := Decode(w, r, &req); err != nil {
		return err
	}
	var f Fields
	from, to := nightRange(&f, req.From, req.To)
	reason := text(&f, "reason", req.Reason, 200)
	if err := f.Err(); err != nil {
		return err
	}
	return s.setOutOfOrder(w, r, hotelID, roomID, from, to, reason, true)
}

func (s *Server) backInOrder(w http.ResponseWriter, r *http.Request) error {
	hotelID, roomID, err := roomPath(s, r)
	if err != nil {
		return err
	}
	q := r.URL.Query()
	var f Fields
	for k := range q {
		if k != "from" && k != "to" {
			f.Add(k, "unknown query parameter")
		}
	}
	from, to := nightRange(&f, q.Get("from"), q.Get("to"))
	if err := f.Err(); err != nil {
		return err
	}
	return s.setOutOfOrder(w, r, hotelID, roomID, from, to, "", false)
}

func (s *Server) setOutOfOrder(w http.ResponseWriter, r *http.Request, hotelID, roomID string, from, to reservation.Date, reason string, out bool) error {
	rm, err := s.cfg.Stays.SetOutOfOrder(r.Context(), hotelID, roomID, from, to, reason, out)
	if err != nil {
		return err
	}
	s.invalidateHotel(r.Context(), hotelID)
	WriteJSON(w, http.StatusOK, rm)
	return nil
}

// roomPath reads the hotel and room of a room route, for an admin.
func roomPath(s *Server, r *http.Request) (hotelID, roomID string, err error) {
	hotelID, roomID, _, err = s.hotelAdminPath(r, "room_id", "room")
	return hotelID, roomID, err
}

// nightRange reads the nights [from, to) of an inventory-like update.
func nightRange(f *Fields, fromText, toText string) (from, to reservation.Date) {
	from, errFrom := reservation.ParseDate(fromText)
	if errFrom != nil {
		f.Add("from", errFrom.Error())
	}
	to, errTo := reservation.ParseDate(toText)
	if errTo != nil {
		f.Add("to", errTo.Error())
	}
	if errFrom == nil && errTo == nil {
		if !from.Before(to) {
			f.Add("to", "must be after from")
		} else if from.DaysUntil(to) > reservation.MaxInventoryRangeDays {
			f.Add("to", "at most 731 nights per update")
		}
	}
	return from, to
}
