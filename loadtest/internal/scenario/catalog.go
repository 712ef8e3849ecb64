package scenario

import (
	"context"
	"fmt"
	"net/http"

	"github.com/berthhq/berth/loadtest/internal/client"
)

// Hotel is a hotel a scenario created.
type Hotel struct {
	ID        string   `json:"hotel_id"`
	Region    string   `json:"home_region"`
	RoomTypes []string `json:"room_types"`
}

var cities = []struct{ city, country, tz string }{
	{"Múnich", "DE", "Europe/Berlin"}, {"Lisboa", "PT", "Europe/Lisbon"}, {"New York", "US", "America/New_York"},
	{"São Paulo", "BR", "America/Sao_Paulo"}, {"Mumbai", "IN", "Asia/Kolkata"}, {"Zürich", "CH", "Europe/Zurich"},
	{"Kraków", "PL", "Europe/Warsaw"}, {"Singapore", "SG", "Asia/Singapore"},
}

// expect checks a setup answer.
func expect(r client.Response, err error, status int, what string) error {
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if r.Status != status {
		return fmt.Errorf("%s: HTTP %d %s", what, r.Status, truncate(string(r.Body), 300))
	}
	return nil
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// CreateHotel creates a hotel homed in region with roomTypes room types of
// rooms rooms each over nights [from, to), through the API.
func (e *Env) CreateHotel(ctx context.Context, i int, region string, roomTypes, rooms int, from, to string) (Hotel, error) {
	c := cities[i%len(cities)]
	r, err := e.Client.Do(ctx, client.Request{Region: region, Method: http.MethodPost, Path: "/v1/hotels", Token: e.Client.Admin(),
		Body: map[string]any{"name": fmt.Sprintf("Loadtest Hotel %d", i), "city": c.city, "country": c.country, "timezone": c.tz, "home_region": region}})
	if err := expect(r, err, http.StatusCreated, "create hotel"); err != nil {
		return Hotel{}, err
	}
	var h Hotel
	if err := r.Decode(&h); err != nil {
		return h, err
	}
	h.Region = region
	for j := range roomTypes {
		r, err := e.Client.Do(ctx, client.Request{Region: region, Method: http.MethodPost, Path: "/v1/hotels/" + h.ID + "/room-types",
			Token: e.Client.Admin(), Body: map[string]any{"name": fmt.Sprintf("Type %d", j), "max_guests": 2, "price_cents": 9900 + 1000*j,
				"currency": "EUR", "overbooking_pct": 0}})
		if err := expect(r, err, http.StatusCreated, "create room type"); err != nil {
			return h, err
		}
		var rt struct {
			ID string `json:"room_type_id"`
		}
		if err := r.Decode(&rt); err != nil {
			return h, err
		}
		r, err = e.Client.Do(ctx, client.Request{Region: region, Method: http.MethodPut,
			Path:  "/v1/hotels/" + h.ID + "/room-types/" + rt.ID + "/inventory",
			Token: e.Client.Admin(), Body: map[string]any{"from": from, "to": to, "total_rooms": rooms}})
		if err := expect(r, err, http.StatusOK, "set inventory"); err != nil {
			return h, err
		}
		h.RoomTypes = append(h.RoomTypes, rt.ID)
	}
	return h, nil
}

// CreateHotels creates n hotels spread round-robin over the regions.
func (e *Env) CreateHotels(ctx context.Context, n, roomTypes, rooms int, from, to string) ([]Hotel, error) {
	hotels := make([]Hotel, 0, n)
	regions := e.Client.Targets.Regions
	for i := range n {
		h, err := e.CreateHotel(ctx, i, regions[i%len(regions)], roomTypes, rooms, from, to)
		if err != nil {
			return hotels, fmt.Errorf("hotel %d: %w", i, err)
		}
		hotels = append(hotels, h)
	}
	return hotels, nil
}

// holdRequest is the body of a hold. Its fields are in the order of their
// names, so it encodes to the bytes the map it replaced did (encoding/json
// sorts a map's keys); a struct encodes without the map's sort and
// reflection over interface values, once per hold (TestHoldBodyEncoding).
type holdRequest struct {
	CheckIn    string `json:"check_in"`
	CheckOut   string `json:"check_out"`
	GuestID    string `json:"guest_id"`
	Quantity   int    `json:"quantity"`
	RoomTypeID string `json:"room_type_id"`
}

// holdBody is the body of a hold.
func holdBody(guest, roomType, in, out string, qty int) holdRequest {
	return holdRequest{CheckIn: in, CheckOut: out, GuestID: guest, Quantity: qty, RoomTypeID: roomType}
}
