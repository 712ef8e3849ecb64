package httpapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/payments"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/google/uuid"
)

func (s *Server) hotelRoutes() {
	s.mux.HandleFunc("POST /v1/hotels", s.handle(s.createHotel))
	s.mux.HandleFunc("GET /v1/hotels", s.handle(s.searchHotels))
	s.mux.HandleFunc("GET /v1/hotels/{hotel_id}", s.handle(s.getHotel))
	s.mux.HandleFunc("PATCH /v1/hotels/{hotel_id}", s.handle(s.updateHotel))
	s.mux.HandleFunc("POST /v1/hotels/{hotel_id}/room-types", s.handle(s.createRoomType))
	s.mux.HandleFunc("PUT /v1/hotels/{hotel_id}/room-types/{room_type_id}/inventory", s.handle(s.setInventory))
	s.mux.HandleFunc("GET /v1/hotels/{hotel_id}/availability", s.handle(s.availability))
	s.mux.HandleFunc("POST /v1/hotels/{hotel_id}/reservations", s.handle(s.hold))
	s.mux.HandleFunc("GET /v1/hotels/{hotel_id}/reservations/{reservation_id}", s.handle(s.getReservation))
	s.mux.HandleFunc("POST /v1/hotels/{hotel_id}/reservations/{reservation_id}/confirm", s.handle(s.confirm))
	s.mux.HandleFunc("POST /v1/hotels/{hotel_id}/reservations/{reservation_id}/cancel", s.handle(s.cancel))
}

// handle adapts a handler that returns an error to http.HandlerFunc; the
// error becomes the problem answer.
func (s *Server) handle(h func(http.ResponseWriter, *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := h(w, r); err != nil {
			WriteProblem(w, r, s.log, err)
		}
	}
}

// text checks a required free-text field. Its characters were checked at
// the edge (edge.go) for every field alike.
func text(f *Fields, name, v string, maxLen int) string {
	v = strings.TrimSpace(v)
	switch {
	case v == "":
		f.Add(name, "required")
	case utf8.RuneCountInString(v) > maxLen:
		f.Add(name, "too long")
	}
	return v
}

type createHotelRequest struct {
	Name       string    `json:"name"`
	City       string    `json:"city"`
	Country    string    `json:"country"`
	Timezone   string    `json:"timezone"`
	HomeRegion string    `json:"home_region"`
	Latitude   *float64  `json:"latitude"`
	Longitude  *float64  `json:"longitude"`
	Amenities  *[]string `json:"amenities"`
	Chain      *string   `json:"chain"`
}

func (s *Server) createHotel(w http.ResponseWriter, r *http.Request) error {
	if _, err := s.requireRole(r, berth.RoleAdmin); err != nil {
		return err
	}
	var req createHotelRequest
	if err := Decode(w, r, &req); err != nil {
		return err
	}
	var f Fields
	h := reservation.Hotel{
		ID:         uuid.NewString(),
		Name:       text(&f, "name", req.Name, 200),
		City:       text(&f, "city", req.City, 100),
		Country:    country(&f, req.Country),
		Timezone:   text(&f, "timezone", req.Timezone, 64),
		HomeRegion: req.HomeRegion,
		Latitude:   req.Latitude,
		Longitude:  req.Longitude,
		Amenities:  amenities(&f, req.Amenities),
	}
	if req.Chain != nil {
		h.Chain = text(&f, "chain", *req.Chain, 100)
	}
	if _, err := time.LoadLocation(h.Timezone); h.Timezone != "" && (err != nil || h.Timezone == "Local") {
		f.Add("timezone", "unknown IANA time zone")
	}
	if !berth.ValidRegion(h.HomeRegion) {
		f.Add("home_region", "want one of "+strings.Join(berth.Regions(), ", "))
	}
	if err := reservation.ValidLocation(h.Latitude, h.Longitude); err != nil {
		f.Add("latitude", err.Error())
	}
	if err := f.Err(); err != nil {
		return err
	}
	h, err := s.cfg.Hotels.CreateHotel(r.Context(), h)
	if err != nil {
		return err
	}
	w.Header().Set("Location", "/v1/hotels/"+h.ID)
	WriteJSON(w, http.StatusCreated, h)
	return nil
}

// country checks an ISO 3166-1 alpha-2 code and upper-cases it.
func country(f *Fields, v string) string {
	c := strings.ToUpper(text(f, "country", v, 2))
	if len(c) != 2 {
		f.Add("country", "want an ISO 3166-1 alpha-2 code")
	}
	return c
}

// amenities checks optional amenity codes; absent is none.
func amenities(f *Fields, v *[]string) []string {
	if v == nil {
		return []string{}
	}
	a, err := reservation.NormalizeAmenities(*v)
	if err != nil {
		f.Add("amenities", err.Error())
	}
	return a
}

// updateHotelRequest names the fields to change; absent fields stay. A
// location is set with both coordinates, or removed with both null.
type updateHotelRequest struct {
	Name      *string           `json:"name"`
	City      *string           `json:"city"`
	Country   *string           `json:"country"`
	Latitude  optional[float64] `json:"latitude"`
	Longitude optional[float64] `json:"longitude"`
	Amenities *[]string         `json:"amenities"`
	// Chain sets the hotel's chain; null removes it.
	Chain optional[string] `json:"chain"`
}

// optional tells an absent JSON field from an explicit null.
type optional[T any] struct {
	Set   bool
	Value *T
}

func (o *optional[T]) UnmarshalJSON(b []byte) error {
	o.Set = true
	if string(b) == "null" {
		o.Value = nil
		return nil
	}
	var v T
	if err := json.Unmarshal(b, &v); err != nil {
		return err
	}
	o.Value = &v
	return nil
}

// updateHotel serves PATCH /v1/hotels/{hotel_id}: a catalog change, written
// in the hotel's home region with its hotel.catalog event.
func (s *Server) updateHotel(w http.ResponseWriter, r *http.Request) error {
	var req updateHotelRequest
	hotelID, err := s.adminWrite(w, r, "hotel_id", "hotel", &req)
	if err != nil {
		return err
	}
	var (
		f Fields
		p reservation.HotelPatch
	)
	if req.Name != nil {
		v := text(&f, "name", *req.Name, 200)
		p.Name = &v
	}
	if req.City != nil {
		v := text(&f, "city", *req.City, 100)
		p.City = &v
	}
	if req.Country != nil {
		v := country(&f, *req.Country)
		p.Country = &v
	}
	if req.Latitude.Set || req.Longitude.Set {
		if req.Latitude.Set != req.Longitude.Set {
			f.Add("latitude", reservation.ErrLocation.Error())
		} else if err := reservation.ValidLocation(req.Latitude.Value, req.Longitude.Value); err != nil {
			f.Add("latitude", err.Error())
		}
		p.Latitude, p.Longitude = req.Latitude.Value, req.Longitude.Value
		p.ClearLocation = req.Latitude.Value == nil
	}
	if req.Amenities != nil {
		a := amenities(&f, req.Amenities)
		p.Amenities = &a
	}
	if req.Chain.Set {
		v := ""
		if req.Chain.Value != nil {
			v = text(&f, "chain", *req.Chain.Value, 100)
		}
		p.Chain = &v
	}
	if err := f.Err(); err != nil {
		return err
	}
	h, err := s.cfg.Hotels.UpdateHotel(r.Context(), hotelID, p)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, h)
	return nil
}

func (s *Server) getHotel(w http.ResponseWriter, r *http.Request) error {
	id, err := PathID(r, "hotel_id", "hotel")
	if err != nil {
		return err
	}
	h, err := s.cfg.Hotels.GetHotel(r.Context(), id)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, h)
	return nil
}

type createRoomTypeRequest struct {
	Name              string `json:"name"`
	MaxGuests         *int   `json:"max_guests"`
	PriceCents        *int64 `json:"price_cents"`
	Currency          string `json:"currency"`
	OverbookingPct    *int   `json:"overbooking_pct"`
	DefaultTotalRooms *int   `json:"default_total_rooms"`
}

// required records a missing required number and returns its value.
func required[T int | int64](f *Fields, name string, v *T) T {
	if v == nil {
		f.Add(name, "required")
		return 0
	}
	return *v
}

func validCurrency(c string) bool {
	if len(c) != 3 {
		return false
	}
	for i := range 3 {
		if c[i] < 'A' || c[i] > 'Z' {
			return false
		}
	}
	return true
}

func (s *Server) createRoomType(w http.ResponseWriter, r *http.Request) error {
	var req createRoomTypeRequest
	hotelID, err := s.adminWrite(w, r, "hotel_id", "hotel", &req)
	if err != nil {
		return err
	}
	var f Fields
	rt := reservation.RoomType{
		ID: uuid.NewString(), HotelID: hotelID, Name: text(&f, "name", req.Name, 200),
		MaxGuests: required(&f, "max_guests", req.MaxGuests), PriceCents: required(&f, "price_cents", req.PriceCents),
		Currency: req.Currency, OverbookingPct: required(&f, "overbooking_pct", req.OverbookingPct),
		DefaultTotalRooms: req.DefaultTotalRooms,
	}
	if req.MaxGuests != nil && (rt.MaxGuests < 1 || rt.MaxGuests > 50) {
		f.Add("max_guests", "want 1 to 50")
	}
	if req.PriceCents != nil && (rt.PriceCents < 0 || rt.PriceCents > 100_000_000_00) {
		f.Add("price_cents", "want 0 to 10000000000")
	}
	if !validCurrency(rt.Currency) {
		f.Add("currency", "want an ISO 4217 code such as EUR")
	}
	if req.OverbookingPct != nil && (rt.OverbookingPct < 0 || rt.OverbookingPct > 25) {
		f.Add("overbooking_pct", "want 0 to 25")
	}
	if d := rt.DefaultTotalRooms; d != nil && (*d < 0 || *d > 100_000) {
		f.Add("default_total_rooms", "want 0 to 100000")
	}
	if err := f.Err(); err != nil {
		return err
	}
	rt, err = s.cfg.Hotels.CreateRoomType(r.Context(), rt)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusCreated, rt)
	return nil
}

type inventoryRequest struct {
	From       string `json:"from"`
	To         string `json:"to"`
	TotalRooms *int   `json:"total_rooms"`
}

func (s *Server) setInventory(w http.ResponseWriter, r *http.Request) error {
	hotelID, roomTypeID, _, err := s.hotelAdminPath(r, "room_type_id", "room type")
	if err != nil {
		return err
	}
	var req inventoryRequest
	if err := Decode(w, r, &req); err != nil {
		return err
	}
	var f Fields
	from, errFrom := reservation.ParseDate(req.From)
	if errFrom != nil {
		f.Add("from", errFrom.Error())
	}
	to, errTo := reservation.ParseDate(req.To)
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
	if req.TotalRooms == nil {
		f.Add("total_rooms", "required")
	} else if *req.TotalRooms < 0 || *req.TotalRooms > 100_000 {
		f.Add("total_rooms", "want 0 to 100000")
	}
	if err := f.Err(); err != nil {
		return err
	}
	n, err := s.cfg.Hotels.SetInventory(r.Context(), hotelID, roomTypeID, from, to, *req.TotalRooms, false)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, map[string]any{"hotel_id": hotelID, "room_type_id": roomTypeID, "nights": n,
		"from": from, "to": to, "total_rooms": *req.TotalRooms})
	return nil
}

// contactFields checks the optional contact fields of a hold, alike for
// reservations and appointments.
func contactFields(f *Fields, email, phone string) {
	if len(email) > 254 || (email != "" && !strings.Contains(email, "@")) {
		f.Add("contact_email", "want an e-mail address")
	}
	if len(phone) > 32 {
		f.Add("contact_phone", "too long")
	}
}

// parseStay reads check_in/check_out from a query or body and validates them.
func (s *Server) parseStay(f *Fields, checkIn, checkOut string) reservation.Stay {
	in, errIn := reservation.ParseDate(checkIn)
	if errIn != nil {
		f.Add("check_in", errIn.Error())
	}
	out, errOut := reservation.ParseDate(checkOut)
	if errOut != nil {
		f.Add("check_out", errOut.Error())
	}
	stay := reservation.Stay{CheckIn: in, CheckOut: out}
	if errIn == nil && errOut == nil {
		var se *reservation.StayError
		if err := stay.Validate(reservation.DateOf(s.cfg.Now().UTC())); errors.As(err, &se) {
			f.Add(se.Field, se.Message)
		} else if err != nil {
			f.Add("check_out", err.Error())
		}
	}
	return stay
}

func (s *Server) availability(w http.ResponseWriter, r *http.Request) error {
	hotelID, err := PathID(r, "hotel_id", "hotel")
	if err != nil {
		return err
	}
	q := r.URL.Query()
	var f Fields
	for k := range q {
		switch k {
		case "check_in", "check_out", "room_type_id":
		default:
			f.Add(k, "unknown query parameter")
		}
	}
	stay := s.parseStay(&f, q.Get("check_in"), q.Get("check_out"))
	roomTypeID := q.Get("room_type_id")
	if roomTypeID != "" && !ValidID(roomTypeID) {
		return berth.Errorf(berth.CodeNotFound, "room type not found")
	}
	if err := f.Err(); err != nil {
		return err
	}
	roomTypeID = strings.ToLower(roomTypeID)
	return s.cachedRead(w, r, string(berth.KindHotel), hotelID, availabilityName(stay, roomTypeID), 0,
		loadAvailability(s.cfg.Hotels, hotelID, stay, roomTypeID))
}

type holdRequest struct {
	GuestID      string `json:"guest_id"`
	RoomTypeID   string `json:"room_type_id"`
	CheckIn      string `json:"check_in"`
	CheckOut     string `json:"check_out"`
	Quantity     int    `json:"quantity"`
	ContactEmail string `json:"contact_email,omitempty"`
	ContactPhone string `json:"contact_phone,omitempty"`
	// ContactPushToken is the guest app's device token for push (FCM).
	ContactPushToken string `json:"contact_push_token,omitempty"`
}

// render returns the Render func of an idempotent write: the value as JSON
// with okStatus, or the business error as a problem. It never panics: a
// value that cannot be encoded is a 500 problem, which makes the store roll
// the write back instead of keeping that answer under the key.
func render(okStatus int) func(any, error) (int, []byte) {
	return func(v any, err error) (int, []byte) {
		if err != nil {
			return Problem(err)
		}
		if res, ok := v.(reservation.Reservation); ok {
			// A hold's answer, by hand, json.Marshal's bytes.
			if body, ok := res.AppendJSON(make([]byte, 0, 640)); ok {
				return okStatus, body
			}
		}
		body, err := json.Marshal(v)
		if err != nil {
			return Problem(fmt.Errorf("encode the answer: %w", err))
		}
		return okStatus, body
	}
}

// writeResponse writes a (possibly replayed) idempotent response.
func writeResponse(w http.ResponseWriter, resp berth.Response) {
	if resp.Replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	writeRaw(w, resp.Status, resp.Body)
}

func (s *Server) hold(w http.ResponseWriter, r *http.Request) error {
	hotelID, err := PathID(r, "hotel_id", "hotel")
	if err != nil {
		return err
	}
	// Hotel reservations are the guest's or an admin's (API.md); staff have
	// no role here.
	p, err := s.requireRole(r, berth.RoleGuest, berth.RoleAdmin)
	if err != nil {
		return err
	}
	key, err := IdempotencyKey(r)
	if err != nil {
		return err
	}
	body, err := readJSONBody(w, r)
	if err != nil {
		return err
	}
	var req holdRequest
	if !req.readFast(body) { // hold_json.go: the common shape by hand
		req = holdRequest{}
		if err := DecodeBytes(body, &req); err != nil {
			return err
		}
	}
	var f Fields
	guestID := text(&f, "guest_id", req.GuestID, 128)
	if req.RoomTypeID == "" {
		f.Add("room_type_id", "required")
	}
	stay := s.parseStay(&f, req.CheckIn, req.CheckOut)
	if req.Quantity < 1 || req.Quantity > reservation.MaxQuantity {
		f.Add("quantity", "want 1 to 50")
	}
	contactFields(&f, req.ContactEmail, req.ContactPhone)
	pushTokenField(&f, req.ContactPushToken)
	if err := f.Err(); err != nil {
		return err
	}
	if !ValidID(req.RoomTypeID) {
		return berth.Errorf(berth.CodeNotFound, "room type not found")
	}
	if !p.MayActForGuest(berth.KindHotel, hotelID, guestID) {
		return berth.Errorf(berth.CodeForbidden, "a guest may book only for themselves")
	}
	resp, err := s.cfg.Hotels.Hold(r.Context(), reservation.HoldRequest{
		ReservationID: uuid.NewString(), HotelID: hotelID, RoomTypeID: strings.ToLower(req.RoomTypeID), GuestID: guestID,
		Stay: stay, Quantity: req.Quantity, ContactEmail: req.ContactEmail, ContactPhone: req.ContactPhone,
		ContactPushToken: req.ContactPushToken,
	}, &berth.Idem{Key: key, Hash: holdHash(hotelID, p.Subject, req), Render: render(http.StatusCreated)})
	if err != nil {
		return err
	}
	if resp, err = s.withPaymentIntent(r.Context(), berth.KindHotel, hotelID, resp); err != nil {
		return err
	}
	writeResponse(w, resp)
	return nil
}

func (s *Server) getReservation(w http.ResponseWriter, r *http.Request) error {
	return getOwned(s, w, r, berth.KindHotel, "hotel_id", "reservation", s.cfg.Hotels.GetReservation,
		func(res reservation.Reservation) string { return res.GuestID })
}

// getOwned serves GET of one reservation or appointment, alike for both:
// the ids from the path (partitionParam, and what+"_id"), the caller, the
// item from the store, then the ownership check before anything is shown.
func getOwned[T any](s *Server, w http.ResponseWriter, r *http.Request, kind berth.Kind, partitionParam, what string,
	get func(ctx context.Context, partitionID, id string) (T, error), guestOf func(T) string) error {
	partitionID, err := PathID(r, partitionParam, string(kind))
	if err != nil {
		return err
	}
	id, err := PathID(r, what+"_id", what)
	if err != nil {
		return err
	}
	p, err := s.Principal(r)
	if err != nil {
		return err
	}
	item, err := get(r.Context(), partitionID, id)
	if err != nil {
		return err
	}
	if err := forGuest(p, kind, partitionID)(guestOf(item)); err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, item)
	return nil
}

type confirmRequest struct {
	PaymentRef string `json:"payment_ref"`
}

func (s *Server) confirm(w http.ResponseWriter, r *http.Request) error {
	return s.transition(w, r, true)
}

func (s *Server) cancel(w http.ResponseWriter, r *http.Request) error {
	return s.transition(w, r, false)
}

func (s *Server) transition(w http.ResponseWriter, r *http.Request, confirm bool) error {
	hotelID, err := PathID(r, "hotel_id", "hotel")
	if err != nil {
		return err
	}
	resID, err := PathID(r, "reservation_id", "reservation")
	if err != nil {
		return err
	}
	// Hotel reservations are the guest's or an admin's (API.md); staff have
	// no role here.
	p, err := s.requireRole(r, berth.RoleGuest, berth.RoleAdmin)
	if err != nil {
		return err
	}
	key, err := IdempotencyKey(r)
	if err != nil {
		return err
	}
	var req confirmRequest
	if confirm {
		if err := Decode(w, r, &req); err != nil {
			return err
		}
		var f Fields
		req.PaymentRef = text(&f, "payment_ref", req.PaymentRef, payments.MaxRefLen)
		if err := f.Err(); err != nil {
			return err
		}
	} else if err := decodeOptional(w, r, &struct{}{}); err != nil {
		return err
	}
	var resp berth.Response
	if confirm {
		var pay payments.Payment
		if pay, err = s.hotelPayment(r.Context(), p, hotelID, resID, req.PaymentRef); err != nil {
			return err
		}
		idem := &berth.Idem{Key: key, Hash: RequestHash("confirm:"+resID, p.Subject, req), Render: render(http.StatusOK)}
		resp, err = s.cfg.Hotels.Confirm(r.Context(), hotelID, resID, pay, forGuest(p, berth.KindHotel, hotelID), idem)
	} else {
		idem := &berth.Idem{Key: key, Hash: RequestHash("cancel:"+resID, p.Subject, nil), Render: render(http.StatusOK)}
		resp, err = s.cfg.Hotels.Cancel(r.Context(), hotelID, resID, forGuest(p, berth.KindHotel, hotelID), idem)
	}
	if err != nil {
		return err
	}
	writeResponse(w, resp)
	return nil
}

// hotelPayment is the payment a confirmation carries: staff and admins
// confirm money taken at the desk (audited); a guest's payment_ref must be
// a payment the provider reports as succeeded for exactly this reservation
// (402 payment_required otherwise, before anything is written).
func (s *Server) hotelPayment(ctx context.Context, p berth.Principal, hotelID, resID, ref string) (payments.Payment, error) {
	if p.Role != berth.RoleGuest {
		return deskPayment(p, ref), nil
	}
	res, err := s.cfg.Hotels.GetReservation(ctx, hotelID, resID)
	if err != nil {
		return payments.Payment{}, err
	}
	if err := forGuest(p, berth.KindHotel, hotelID)(res.GuestID); err != nil {
		return payments.Payment{}, err
	}
	if a := reservation.OnConfirm(res.Status); a == reservation.ConfirmAlready || a == reservation.ConfirmRefuse {
		// Confirmed or cancelled: the store answers it as it is (200 or
		// 409 invalid_state) without a payment; neither status ever goes
		// back to one that a payment would confirm.
		return payments.Payment{Ref: ref, Method: payments.MethodNone, ActorSubject: p.Subject, ActorRole: string(p.Role)}, nil
	}
	return s.guestPayment(ctx, p, ref, payments.Due{Kind: string(berth.KindHotel), PartitionID: hotelID, ReservationID: res.ID,
		AmountCents: res.TotalPriceCents, Currency: res.Currency}, true)
}

// decodeOptional accepts an empty body or a JSON object matching dst.
func decodeOptional(w http.ResponseWriter, r *http.Request, dst any) error {
	if r.ContentLength == 0 && r.Header.Get("Content-Type") == "" {
		return nil
	}
	body, err := readBody(w, r)
	if err != nil {
		return err
	}
	if len(strings.TrimSpace(string(body))) == 0 {
		return nil
	}
	return DecodeBytes(body, dst)
}
