package httpapi

import (
	"context"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/berthhq/berth/internal/waitlist"
	"github.com/google/uuid"
)

// WaitlistStore is what the waitlist routes need from the database.
type WaitlistStore interface {
	JoinWaitlist(ctx context.Context, req waitlist.JoinRequest, idem *berth.Idem) (berth.Response, error)
	LeaveWaitlist(ctx context.Context, hotelID, entryID string, authorize func(guestID string) error, idem *berth.Idem) (berth.Response, error)
	GetWaitlistEntry(ctx context.Context, hotelID, entryID string) (waitlist.Entry, error)
	ListWaitlist(ctx context.Context, hotelID string, f waitlist.Filter) ([]waitlist.Entry, error)
}

func (s *Server) waitlistRoutes() {
	s.mux.HandleFunc("POST /v1/hotels/{hotel_id}/waitlist", s.handle(s.joinWaitlist))
	s.mux.HandleFunc("GET /v1/hotels/{hotel_id}/waitlist", s.handle(s.listWaitlist))
	s.mux.HandleFunc("GET /v1/hotels/{hotel_id}/waitlist/{entry_id}", s.handle(s.getWaitlistEntry))
	s.mux.HandleFunc("POST /v1/hotels/{hotel_id}/waitlist/{entry_id}/leave", s.handle(s.leaveWaitlist))
}

type joinRequest struct {
	GuestID      string `json:"guest_id"`
	RoomTypeID   string `json:"room_type_id"`
	CheckIn      string `json:"check_in"`
	CheckOut     string `json:"check_out"`
	Quantity     *int   `json:"quantity,omitempty"`
	ContactEmail string `json:"contact_email,omitempty"`
	ContactPhone string `json:"contact_phone,omitempty"`
	// ContactPushToken is the guest app's device token for push (FCM).
	ContactPushToken string `json:"contact_push_token,omitempty"`
}

// joinWaitlist puts a guest (their own token, or an admin) in the line for
// one room of a type for a stay.
func (s *Server) joinWaitlist(w http.ResponseWriter, r *http.Request) error {
	hotelID, err := PathID(r, "hotel_id", "hotel")
	if err != nil {
		return err
	}
	p, err := s.requireRole(r, berth.RoleGuest, berth.RoleAdmin)
	if err != nil {
		return err
	}
	key, err := IdempotencyKey(r)
	if err != nil {
		return err
	}
	var req joinRequest
	if err := Decode(w, r, &req); err != nil {
		return err
	}
	var f Fields
	guestID := text(&f, "guest_id", req.GuestID, 128)
	if req.RoomTypeID == "" {
		f.Add("room_type_id", "required")
	}
	stay := s.parseStay(&f, req.CheckIn, req.CheckOut)
	if req.Quantity != nil && *req.Quantity != 1 {
		f.Add("quantity", "a waitlist entry is for one room: want 1")
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
		return berth.Errorf(berth.CodeForbidden, "a guest may join a waitlist only for themselves")
	}
	resp, err := s.cfg.Waitlist.JoinWaitlist(r.Context(), waitlist.JoinRequest{
		EntryID: uuid.NewString(), HotelID: hotelID, RoomTypeID: strings.ToLower(req.RoomTypeID), GuestID: guestID,
		Stay: stay, ContactEmail: req.ContactEmail, ContactPhone: req.ContactPhone, ContactPushToken: req.ContactPushToken,
	}, &berth.Idem{Key: key, Hash: RequestHash("waitlist-join:"+hotelID, p.Subject, req), Render: render(http.StatusCreated)})
	if err != nil {
		return err
	}
	writeResponse(w, resp)
	return nil
}

func (s *Server) leaveWaitlist(w http.ResponseWriter, r *http.Request) error {
	hotelID, err := PathID(r, "hotel_id", "hotel")
	if err != nil {
		return err
	}
	entryID, err := PathID(r, "entry_id", "waitlist entry")
	if err != nil {
		return err
	}
	p, err := s.requireRole(r, berth.RoleGuest, berth.RoleAdmin)
	if err != nil {
		return err
	}
	key, err := IdempotencyKey(r)
	if err != nil {
		return err
	}
	if err := decodeOptional(w, r, &struct{}{}); err != nil {
		return err
	}
	idem := &berth.Idem{Key: key, Hash: RequestHash("waitlist-leave:"+entryID, p.Subject, nil), Render: render(http.StatusOK)}
	resp, err := s.cfg.Waitlist.LeaveWaitlist(r.Context(), hotelID, entryID, forGuest(p, berth.KindHotel, hotelID), idem)
	if err != nil {
		return err
	}
	writeResponse(w, resp)
	return nil
}

// getWaitlistEntry shows a guest their entry: the position while it waits,
// the offer once made — with the payment intent of a prepaid offer still
// held, which the guest pays before confirming the offered reservation as
// any hold.
func (s *Server) getWaitlistEntry(w http.ResponseWriter, r *http.Request) error {
	hotelID, err := PathID(r, "hotel_id", "hotel")
	if err != nil {
		return err
	}
	entryID, err := PathID(r, "entry_id", "waitlist entry")
	if err != nil {
		return err
	}
	p, err := s.Principal(r)
	if err != nil {
		return err
	}
	e, err := s.cfg.Waitlist.GetWaitlistEntry(r.Context(), hotelID, entryID)
	if err != nil {
		return err
	}
	if err := forGuest(p, berth.KindHotel, hotelID)(e.GuestID); err != nil {
		return err
	}
	view := waitlistEntryView{Entry: e}
	if e.Offer != nil && e.Offer.ReservationStatus == reservation.StatusHeld && s.cfg.PaymentProvider != nil {
		res, err := s.cfg.Hotels.GetReservation(r.Context(), hotelID, e.Offer.ReservationID)
		if err != nil {
			return err
		}
		if res.TotalPriceCents > 0 && res.Currency != "" {
			pay, err := s.paymentIntent(r.Context(), berth.KindHotel, hotelID, res.ID, res.TotalPriceCents, res.Currency)
			if err != nil {
				return err
			}
			view.Payment = &pay
		}
	}
	WriteJSON(w, http.StatusOK, view)
	return nil
}

// waitlistEntryView is an entry as GET shows it: with the payment of a
// held, prepaid offer.
type waitlistEntryView struct {
	waitlist.Entry
	Payment *paymentView `json:"payment,omitempty"`
}

// listWaitlist lists a hotel's waitlists: an admin sees every entry, a
// guest only their own (guest_id is then required and must be theirs).
func (s *Server) listWaitlist(w http.ResponseWriter, r *http.Request) error {
	hotelID, err := PathID(r, "hotel_id", "hotel")
	if err != nil {
		return err
	}
	p, err := s.requireRole(r, berth.RoleGuest, berth.RoleAdmin)
	if err != nil {
		return err
	}
	var (
		f      Fields
		filter waitlist.Filter
	)
	q := parseWaitlistQuery(r, &f, p, "room_type_id", "a room type id")
	filter.RoomTypeID, filter.GuestID, filter.Status, filter.Limit = q.id, q.guestID, q.status, q.limit
	if err := f.Err(); err != nil {
		return err
	}
	if p.Role == berth.RoleGuest && !p.MayActForGuest(berth.KindHotel, hotelID, filter.GuestID) {
		return berth.Errorf(berth.CodeForbidden, "a guest sees only their own waitlist entries")
	}
	entries, err := s.cfg.Waitlist.ListWaitlist(r.Context(), hotelID, filter)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, map[string]any{"hotel_id": hotelID, "entries": entries})
	return nil
}

// waitlistQuery is what a waitlist listing asks for.
type waitlistQuery struct {
	id, guestID string
	status      waitlist.Status
	limit       int
}

// parseWaitlistQuery reads the query of a waitlist listing — hotel or
// clinic: the line's id (idParam: room_type_id or doctor_id), guest_id,
// status, limit — into f's complaints; a guest's token must name guest_id.
func parseWaitlistQuery(r *http.Request, f *Fields, p berth.Principal, idParam, idWant string) waitlistQuery {
	var out waitlistQuery
	q := r.URL.Query()
	for k, v := range q {
		if len(v) != 1 {
			f.Add(k, "give it once")
		}
		switch k {
		case idParam:
			out.id = strings.ToLower(q.Get(k))
			if !ValidID(out.id) {
				f.Add(k, "want "+idWant)
			}
		case "guest_id":
			out.guestID = text(f, k, q.Get(k), 128)
		case "status":
			out.status = waitlist.Status(q.Get(k))
			if !slices.Contains(waitlist.Statuses, out.status) {
				f.Add(k, "want waiting, offered, booked, lapsed, declined or left")
			}
		case "limit":
			n, err := strconv.Atoi(q.Get(k))
			if err != nil || n < 1 || n > 500 {
				f.Add(k, "want 1 to 500")
			}
			out.limit = n
		default:
			f.Add(k, "unknown query parameter")
		}
	}
	if p.Role == berth.RoleGuest && out.guestID == "" {
		f.Add("guest_id", "required with a guest's token")
	}
	return out
}
