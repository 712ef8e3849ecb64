package main

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/spf13/cobra"
)

// `booking serve --route` runs the region's router in the process: a hold
// sent to the router's own listener is served in-process by this booking
// service (its answer and headers as through a router process), the
// router's /metrics counts it as the router's, the booking service's
// /metrics as the booking service's, and the booking service's span is a
// child of the router's in one trace.
func TestServeWithRoute(t *testing.T) {
	s := startServiceWith(t, serviceOptions{route: true})
	h := s.SeedHotel("", 1, 0, bookingtest.Date(0), bookingtest.Date(60))
	rt := &bookingtest.Env{T: t, URL: s.router, Tokens: s.Tokens, Client: s.Client}
	guest := "g-route"
	r := rt.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations",
		Token: s.Token(guest, berth.RoleGuest), IdemKey: bookingtest.NewKey(),
		Header: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		Body: map[string]any{"guest_id": guest, "room_type_id": h.RoomTypeID,
			"check_in": bookingtest.Date(30), "check_out": bookingtest.Date(32), "quantity": 1}})
	if r.Status != http.StatusCreated {
		t.Fatalf("hold through the in-process router: %d %s", r.Status, r.Body)
	}
	for k, want := range map[string]string{"X-Berth-Served-By": "us-east", "X-Berth-Router": "us-east", "X-Berth-Home-Region": "us-east"} {
		if got := r.Header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	// Refused like any hold: the in-process path checks the token too.
	if r := rt.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations", IdemKey: bookingtest.NewKey(),
		Body: map[string]any{"guest_id": guest}}); r.Status != http.StatusUnauthorized {
		t.Errorf("hold without a token: %d %s", r.Status, r.Body)
	}
	routerMetrics := string(rt.Do(bookingtest.Request{Method: "GET", Path: "/metrics"}).Body)
	for _, want := range []struct {
		name   string
		labels []string
	}{
		{"berth_router_requests_total", []string{`class="write"`, `status="201"`}},
		{"http_server_request_duration_seconds_count", []string{`http_route="/v1/hotels/{id}/reservations"`, `http_response_status_code="201"`}},
	} {
		if !hasSeries(routerMetrics, want.name, want.labels...) {
			t.Errorf("router /metrics: no series %s%v:\n%s", want.name, want.labels, routerMetrics)
		}
	}
	if hasSeries(routerMetrics, "berth_booking_outcomes_total") {
		t.Errorf("the router's /metrics carries the booking service's series")
	}
	bookingMetrics := string(s.Do(bookingtest.Request{Method: "GET", Path: "/metrics"}).Body)
	if !hasSeries(bookingMetrics, "berth_booking_outcomes_total", `op="hotel.hold"`, `code="ok"`) {
		t.Errorf("booking /metrics: the in-process hold is not counted:\n%s", bookingMetrics)
	}
	if hasSeries(bookingMetrics, "berth_router_requests_total") {
		t.Errorf("the booking service's /metrics carries the router's series")
	}
	// One trace: the client's; the booking service's server span under the
	// router's client span, under the router's server span.
	var routerServer, routerClient, bookingServer string
	var bookingParent string
	for _, sp := range s.spans.GetSpans() {
		if sp.SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
			continue
		}
		svc := ""
		for _, a := range sp.Resource.Attributes() {
			if a.Key == "service.name" {
				svc = a.Value.AsString()
			}
		}
		switch {
		case svc == "router" && sp.SpanKind.String() == "server":
			routerServer = sp.SpanContext.SpanID().String()
		case svc == "router" && sp.SpanKind.String() == "client":
			routerClient = sp.SpanContext.SpanID().String()
		case svc == "booking" && sp.SpanKind.String() == "server":
			bookingServer, bookingParent = sp.SpanContext.SpanID().String(), sp.Parent.SpanID().String()
		}
	}
	if routerServer == "" || routerClient == "" || bookingServer == "" || bookingParent != routerClient {
		t.Errorf("trace: router server %q, router client %q, booking server %q with parent %q", routerServer, routerClient, bookingServer, bookingParent)
	}
	// Stopping the process stops both listeners and returns nil (Cleanup).
	s.stop()
	select {
	case err := <-s.exited:
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		s.exited <- nil // for the Cleanup
	case <-time.After(time.Minute):
		t.Fatal("the service did not stop")
	}
	if _, err := http.Get(s.router + "/healthz"); err == nil {
		t.Error("the router still answers after the service stopped")
	}
}

// BERTH_ROUTE reads the router's settings as `router serve` does, less the
// listen address (BERTH_ROUTER_ADDR) and this region's booking URL.
func TestRouteConfig(t *testing.T) {
	base := map[string]string{"BERTH_REGION": "eu-west", "BERTH_DATABASE_URL": "postgres://x", "BERTH_TOKEN_SECRET": bookingtest.Secret,
		"BERTH_DEV_INTENT_SECRET": bookingtest.DevIntentSecret, "BERTH_HTTP_ADDR": ":8081", "BERTH_BOOKING_URLS": "", "BERTH_ROUTER_ADDR": "", "BERTH_ROUTE": ""}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want string // in the error; "" is valid
	}{
		{"off by default", nil, ""},
		{"on", map[string]string{"BERTH_ROUTE": "true"}, ""},
		{"same address", map[string]string{"BERTH_ROUTE": "true", "BERTH_ROUTER_ADDR": ":8081"}, "BERTH_ROUTER_ADDR"},
		{"bad address", map[string]string{"BERTH_ROUTE": "true", "BERTH_ROUTER_ADDR": "8090"}, "BERTH_ROUTER_ADDR"},
		{"bad router setting", map[string]string{"BERTH_ROUTE": "true", "BERTH_FOLLOW_MOVES_FOR": "1ms"}, "BERTH_FOLLOW_MOVES_FOR"},
		{"not a bool", map[string]string{"BERTH_ROUTE": "sometimes"}, "BERTH_ROUTE"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range base {
				t.Setenv(k, v)
			}
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			cfg, err := loadServeConfig(&cobra.Command{})
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("valid settings refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("error %v, want one naming %s", err, tc.want)
			case tc.want == "" && (cfg.Route != nil) != (tc.env["BERTH_ROUTE"] == "true"):
				t.Fatalf("route %v with BERTH_ROUTE=%q", cfg.Route != nil, tc.env["BERTH_ROUTE"])
			case cfg.Route != nil && tc.want == "" && (cfg.Route.Addr != ":8088" || cfg.Route.Region != "eu-west"):
				t.Fatalf("router settings %+v", cfg.Route)
			}
		})
	}
}
