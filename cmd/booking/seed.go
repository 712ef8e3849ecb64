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
	"github.com/berthhq/berth/internal/cli"
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
	for _, r := range berth.Regions() {
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

var demoClinics = []struct {
	name, tz, region string
}{
	{"Hudson Family Practice", "America/New_York", "us-east"},
	{"Praxis am Markt", "Europe/Berlin", "eu-west"},
	{"Lotus Health Clinic", "Asia/Kolkata", "ap-south"},
}

// nextWeekday returns t, or the Monday after it when t falls on a weekend.
func nextWeekday(t time.Time) time.Time {
	for t.Weekday() == time.Saturday || t.Weekday() == time.Sunday {
		t = t.AddDate(0, 0, 1)
	}
	return t
}

func seedDemo(ctx context.Context, out io.Writer, printExamples bool) error {
	tokens, err := auth.New(config.Env("BERTH_TOKEN_SECRET", ""))
	if err != nil {
		return cli.Usage(fmt.Errorf("BERTH_TOKEN_SECRET: %w", err))
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
	type clinicMade struct{ clinic, doctor, region string }
	var clinics []clinicMade
	for _, dc := range demoClinics {
		var clinic struct {
			ID string `json:"clinic_id"`
		}
		if err := c.do(ctx, dc.region, "POST", "/v1/clinics", map[string]any{
			"name": dc.name, "timezone": dc.tz, "home_region": dc.region}, &clinic); err != nil {
			return err
		}
		for i, doc := range []struct {
			name    string
			minutes int
			prepay  bool
		}{{"Dr. Ada Byron", 15, false}, {"Dr. Li Wen", 30, true}} {
			body := map[string]any{"name": doc.name, "slot_minutes": doc.minutes, "prepay_required": doc.prepay}
			if doc.prepay {
				// Prepaid online: the price its payment must match.
				body["price_cents"], body["currency"] = 6000, "EUR"
			}
			weekly := []map[string]any{}
			for day := 1; day <= 5; day++ {
				weekly = append(weekly, map[string]any{"weekday": day, "start": "08:00", "end": "12:00"},
					map[string]any{"weekday": day, "start": "13:00", "end": "17:00"})
			}
			var doctor struct {
				ID string `json:"doctor_id"`
			}
			body["weekly"] = weekly
			if err := c.do(ctx, dc.region, "POST", "/v1/clinics/"+clinic.ID+"/doctors", body, &doctor); err != nil {
				return err
			}
			if i == 0 {
				clinics = append(clinics, clinicMade{clinic.ID, doctor.ID, dc.region})
			}
		}
		if err := c.do(ctx, dc.region, "POST", "/v1/clinics/"+clinic.ID+"/slots/materialize",
			map[string]any{"from": from, "to": today.AddDate(0, 0, 14).Format("2006-01-02")}, nil); err != nil {
			return err
		}
		fmt.Fprintf(out, "seeded clinic %-19s %-10s home %-8s id %s\n", dc.name, "", dc.region, clinic.ID)
	}
	if printExamples && len(made) > 0 {
		m := made[2%len(made)] // homed in eu-west: the us-east router forwards its writes
		ci, co := today.AddDate(0, 0, 7).Format("2006-01-02"), today.AddDate(0, 0, 10).Format("2006-01-02")
		base := urls["us-east"]
		fmt.Fprintf(out, `
Try it (source .local/env first):

  # availability of a hotel homed in %[4]s, read near the client (us-east)
  curl -s '%[1]s/v1/hotels/%[2]s/availability?check_in=%[5]s&check_out=%[6]s' | jq

  # hold a room as guest-demo (the token is in .local/env); the answer's
  # "payment" names the intent to pay: intent_id, amount, currency, client_secret
  curl -s -X POST %[1]s/v1/hotels/%[2]s/reservations \
    -H "Authorization: Bearer $BERTH_GUEST_TOKEN" -H "Idempotency-Key: $(cat /proc/sys/kernel/random/uuid)" \
    -H 'Content-Type: application/json' \
    -d '{"guest_id":"guest-demo","room_type_id":"%[3]s","check_in":"%[5]s","check_out":"%[6]s","quantity":1}' | tee .local/hold.json | jq

  # pay it with the development payment provider (development only): it
  # settles the intent and sends the signed webhook, which confirms the hold
  curl -s -X POST %[1]s/v1/dev/payments/$(jq -r .payment.intent_id .local/hold.json)/pay \
    -H 'Content-Type: application/json' -d "{\"client_secret\":\"$(jq -r .payment.client_secret .local/hold.json)\"}" | jq

  # or confirm it yourself with the paid intent (any other payment_ref is 402 payment_required)
  curl -s -X POST %[1]s/v1/hotels/%[2]s/reservations/$(jq -r .reservation_id .local/hold.json)/confirm \
    -H "Authorization: Bearer $BERTH_GUEST_TOKEN" -H "Idempotency-Key: $(cat /proc/sys/kernel/random/uuid)" \
    -H 'Content-Type: application/json' -d "{\"payment_ref\":\"$(jq -r .payment.intent_id .local/hold.json)\"}" | jq

  # every booking of guest-demo across all regions, as the guest sees it
  curl -s %[1]s/v1/guests/guest-demo/reservations -H "Authorization: Bearer $BERTH_GUEST_TOKEN" | jq

  # ... and as a partner, once guest-demo granted it (PARTNER_ID from: readmodel partners list)
  curl -s -X PUT %[1]s/v1/guests/guest-demo/partners/PARTNER_ID -H "Authorization: Bearer $BERTH_GUEST_TOKEN" | jq
  curl -s %[1]s/v1/guests/guest-demo/reservations -H "X-API-Key: $BERTH_PARTNER_API_KEY" | jq
`, base, m.hotel, m.roomType, m.region, ci, co)
		if len(clinics) > 0 {
			cm := clinics[len(clinics)-1]
			day := nextWeekday(today.AddDate(0, 0, 2)).Format("2006-01-02")
			fmt.Fprintf(out, `
  # open slots of a doctor of a clinic homed in %[4]s
  curl -s '%[1]s/v1/clinics/%[2]s/doctors/%[3]s/slots?date=%[5]s' | jq

  # book any open slot of that doctor that day (no prepayment: confirmed at once)
  curl -s -X POST %[1]s/v1/clinics/%[2]s/appointments \
    -H "Authorization: Bearer $BERTH_GUEST_TOKEN" -H "Idempotency-Key: $(cat /proc/sys/kernel/random/uuid)" \
    -H 'Content-Type: application/json' \
    -d '{"guest_id":"guest-demo","doctor_id":"%[3]s","window_start":"%[5]sT00:00:00Z","window_end":"%[5]sT23:59:00Z"}' | jq
`, base, cm.clinic, cm.doctor, cm.region, day)
		}
	}
	return nil
}
