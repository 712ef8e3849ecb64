package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/berthhq/berth/internal/auth"
	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/config"
	"github.com/spf13/cobra"
)

func newSeedDemoCmd() *cobra.Command {
	var printExamples bool
	cmd := &cobra.Command{
		Use:   "seed-demo",
		Short: "Seed a small demo catalog through the API and print example requests",
		Long: `seed-demo creates demo hotels homed in every region through the running
platform's API (BERTH_ROUTER_URLS, or BERTH_BOOKING_URLS), loads 90 nights of
inventory, and prints curl commands that work against it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return seedDemo(cmd.Context(), cmd.OutOrStdout(), printExamples)
		},
	}
	cmd.Flags().BoolVar(&printExamples, "print-examples", true, "print example curl commands")
	return cmd
}

type demoClient struct {
	http  *http.Client
	token string
	urls  map[string]string // region → base URL answering for it
}

func (c *demoClient) do(ctx context.Context, region, method, path string, body any, out any) error {
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.urls[region]+path, rd)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+c.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := c.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		return fmt.Errorf("%s %s: %s: %s", method, path, resp.Status, strings.TrimSpace(string(data)))
	}
	if out != nil {
		return json.Unmarshal(data, out)
	}
	return nil
}

func reachable(base string) bool {
	u, err := url.Parse(base)
	if err != nil {
		return false
	}
	c, err := net.DialTimeout("tcp", u.Host, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// seedURLs picks, per region, the router if it answers (it forwards every
// write home), else the booking service of that region.
func seedURLs() (map[string]string, error) {
	routers, err := config.RegionURLs("BERTH_ROUTER_URLS", config.Env("BERTH_ROUTER_URLS", ""))
	if err != nil {
		return nil, err
	}
	bookings, err := config.RegionURLs("BERTH_BOOKING_URLS", config.Env("BERTH_BOOKING_URLS", ""))
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, r := range berth.Regions {
		for _, u := range []string{routers[r], bookings[r]} {
			if u != "" && reachable(u) {
				out[r] = strings.TrimRight(u, "/")
				break
			}
		}
		if out[r] == "" {
			return nil, fmt.Errorf("no booking service or router answers for %s (BERTH_BOOKING_URLS, BERTH_ROUTER_URLS)", r)
		}
	}
	return out, nil
}

var demoHotels = []struct {
	name, city, country, tz, region string
}{
	{"Harbor Lights", "New York", "US", "America/New_York", "us-east"},
	{"Maple Court", "Boston", "US", "America/New_York", "us-east"},
	{"Hotel Isar", "Múnich", "DE", "Europe/Berlin", "eu-west"},
	{"Canal House", "Amsterdam", "NL", "Europe/Amsterdam", "eu-west"},
	{"Marine Drive Inn", "Mumbai", "IN", "Asia/Kolkata", "ap-south"},
	{"Garden Suites", "Bengaluru", "IN", "Asia/Kolkata", "ap-south"},
}

func seedDemo(ctx context.Context, out io.Writer, printExamples bool) error {
	tokens, err := auth.New(config.Env("BERTH_TOKEN_SECRET", ""))
	if err != nil {
		return usageError{fmt.Errorf("BERTH_TOKEN_SECRET: %w", err)}
	}
	admin, err := tokens.Mint(berth.Principal{Subject: "seed-demo", Role: berth.RoleAdmin}, time.Hour)
	if err != nil {
		return err
	}
	urls, err := seedURLs()
	if err != nil {
		return err
	}
	c := &demoClient{http: &http.Client{Timeout: 30 * time.Second}, token: admin, urls: urls}
	today := time.Now().UTC()
	from, to := today.Format("2006-01-02"), today.AddDate(0, 0, 90).Format("2006-01-02")
	type created struct{ hotel, roomType, region string }
	var made []created
	for i, h := range demoHotels {
		var hotel struct {
			ID string `json:"hotel_id"`
		}
		if err := c.do(ctx, h.region, "POST", "/v1/hotels", map[string]any{
			"name": h.name, "city": h.city, "country": h.country, "timezone": h.tz, "home_region": h.region,
		}, &hotel); err != nil {
			return err
		}
		for j, rt := range []struct {
			name  string
			price int
			rooms int
		}{{"Standard Double", 12900, 20}, {"Suite", 34900, 4}} {
			var roomType struct {
				ID string `json:"room_type_id"`
			}
			if err := c.do(ctx, h.region, "POST", "/v1/hotels/"+hotel.ID+"/room-types", map[string]any{
				"name": rt.name, "max_guests": 2 + j, "price_cents": rt.price + 1000*i, "currency": "EUR", "overbooking_pct": 0,
			}, &roomType); err != nil {
				return err
			}
			if err := c.do(ctx, h.region, "PUT", "/v1/hotels/"+hotel.ID+"/room-types/"+roomType.ID+"/inventory",
				map[string]any{"from": from, "to": to, "total_rooms": rt.rooms}, nil); err != nil {
				return err
			}
			if j == 0 {
				made = append(made, created{hotel.ID, roomType.ID, h.region})
			}
		}
		fmt.Fprintf(out, "seeded hotel %-18s %-10s home %-8s id %s\n", h.name, h.city, h.region, hotel.ID)
	}
	if printExamples && len(made) > 0 {
		m := made[2%len(made)] // homed in eu-west: the us-east router forwards its writes
		ci, co := today.AddDate(0, 0, 7).Format("2006-01-02"), today.AddDate(0, 0, 10).Format("2006-01-02")
		base := urls["us-east"]
		fmt.Fprintf(out, `
Try it (source .local/env first):

  # availability of a hotel homed in %[4]s, read near the client (us-east)
  curl -s '%[1]s/v1/hotels/%[2]s/availability?check_in=%[5]s&check_out=%[6]s' | jq

  # hold a room as guest-demo (the token is in .local/env)
  curl -s -X POST %[1]s/v1/hotels/%[2]s/reservations \
    -H "Authorization: Bearer $BERTH_GUEST_TOKEN" -H "Idempotency-Key: $(uuidgen || date +%%s%%N)" \
    -H 'Content-Type: application/json' \
    -d '{"guest_id":"guest-demo","room_type_id":"%[3]s","check_in":"%[5]s","check_out":"%[6]s","quantity":1}' | jq

  # confirm it (replace RESERVATION_ID)
  curl -s -X POST %[1]s/v1/hotels/%[2]s/reservations/RESERVATION_ID/confirm \
    -H "Authorization: Bearer $BERTH_GUEST_TOKEN" -H "Idempotency-Key: $(uuidgen || date +%%s%%N)" \
    -H 'Content-Type: application/json' -d '{"payment_ref":"pay_demo_1"}' | jq
`, base, m.hotel, m.roomType, m.region, ci, co)
	}
	return nil
}
