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
	hotelID, p, err := hotelLine.partition(s, r)
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
	return s.leaveEntry(w, r, hotelLine, s.cfg.Waitlist.LeaveWaitlist)
}

// getWaitlistEntry shows a guest their entry: the position while it waits,
// the offer once made — with the payment intent of a prepaid offer still
// held, which the guest pays before confirming the offered reservation as
// any hold.
func (s *Server) getWaitlistEntry(w http.ResponseWriter, r *http.Request) error {
	hotelID, entryID, err := hotelLine.entryPath(r)
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
	hotelID, q, err := hotelLine.listing(s, r, "room_type_id", "a room type id", "a guest sees only their own waitlist entries")
	if err != nil {
		return err
	}
	filter := waitlist.Filter{RoomTypeID: q.id, GuestID: q.guestID, Status: q.status, Limit: q.limit}
	entries, err := s.cfg.Waitlist.ListWaitlist(r.Context(), hotelID, filter)
	if err != nil {
		return err
	}
	WriteJSON(w, http.StatusOK, map[string]any{"hotel_id": hotelID, "entries": entries})
	return nil
}

// waitlistLine is what tells the hotel and the clinic waitlist routes apart
// where they otherwise do the same: the partition's kind, its path
// parameter and name, who may use the join, list and leave routes, and the
// leave route's idempotency hash prefix (part of stored keys' hashes: it
// must never change).
type waitlistLine struct {
	kind      berth.Kind
	idParam   string
	what      string
	principal func(s *Server, r *http.Request, partitionID string) (berth.Principal, error)
	leaveHash string
}

var (
	hotelLine = waitlistLine{kind: berth.KindHotel, idParam: "hotel_id", what: "hotel", leaveHash: "waitlist-leave:",
		principal: func(s *Server, r *http.Request, _ string) (berth.Principal, error) {
			return s.requireRole(r, berth.RoleGuest, berth.RoleAdmin)
		}}
	clinicLine = waitlistLine{kind: berth.KindClinic, idParam: "clinic_id", what: "clinic", leaveHash: "clinic-waitlist-leave:",
		principal: (*Server).clinicWaitlistPrincipal}
)

// partition reads the partition's path id, then the principal: a bad id is
// a 404 before the token is looked at.
func (l waitlistLine) partition(s *Server, r *http.Request) (string, berth.Principal, error) {
	partitionID, err := PathID(r, l.idParam, l.what)
	if err != nil {
		return "", berth.Principal{}, err
	}
	p, err := l.principal(s, r, partitionID)
	return partitionID, p, err
}

// entryPath reads an entry route's ids, the partition's first.
func (l waitlistLine) entryPath(r *http.Request) (partitionID, entryID string, err error) {
	partitionID, err = PathID(r, l.idParam, l.what)
	if err != nil {
		return "", "", err
	}
	entryID, err = PathID(r, "entry_id", "waitlist entry")
	if err != nil {
		return "", "", err
	}
	return partitionID, entryID, nil
}

// listing reads a listing request: the partition, the principal, the query
// (idParam names the line, idWant its complaint), and refuses a guest
// asking for someone else's entries with forbidden.
func (l waitlistLine) listing(s *Server, r *http.Request, idParam, idWant, forbidden string) (string, waitlistQuery, error) {
	partitionID, p, err := l.partition(s, r)
	if err != nil {
		return "", waitlistQuery{}, err
	}
	var f Fields
	q := parseWaitlistQuery(r, &f, p, idParam, idWant)
	if err := f.Err(); err != nil {
		return "", waitlistQuery{}, err
	}
	if p.Role == berth.RoleGuest && !p.MayActForGuest(l.kind, partitionID, q.guestID) {
		return "", waitlistQuery{}, berth.Errorf(berth.CodeForbidden, "%s", forbidden)
	}
	return partitionID, q, nil
}

// leaveEntry is the leave route of both waitlists: path ids, the
// principal, the Idempotency-Key, an optional empty body, in that order;
// leave checks that the entry is the principal's to leave.
func (s *Server) leaveEntry(w http.ResponseWriter, r *http.Request, l waitlistLine,
	leave func(ctx context.Context, partitionID, entryID string, authorize func(guestID string) error, idem *berth.Idem) (berth.Response, error)) error {
	partitionID, entryID, err := l.entryPath(r)
	if err != nil {
		return err
	}
	p, err := l.principal(s, r, partitionID)
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
	idem := &berth.Idem{Key: key, Hash: RequestHash(l.leaveHash+entryID, p.Subject, nil), Render: render(http.StatusOK)}
	resp, err := leave(r.Context(), partitionID, entryID, forGuest(p, l.kind, partitionID), idem)
	if err != nil {
		return err
	}
	writeResponse(w, resp)
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
