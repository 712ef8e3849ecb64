package ratelimit

import (
	"net/http"
	"reflect"
	"strings"
	"testing"
)

func TestParseRules(t *testing.T) {
	t.Parallel()
	ok := []struct {
		in   string
		want Rules
	}{
		{"", Rules{}},
		{"hotel_writes=200/s:400", Rules{"hotel_writes": {Rate: 200, Burst: 400}}},
		{"client_reads=100/s, guest_holds=5/s", Rules{"client_reads": {Rate: 100, Burst: 100}, "guest_holds": {Rate: 5, Burst: 5}}},
		{"guest_holds=30/m", Rules{"guest_holds": {Rate: 0.5, Burst: 1}}},
		{"client_writes=3600/h:2", Rules{"client_writes": {Rate: 1, Burst: 2}}},
	}
	for _, tc := range ok {
		t.Run(tc.in, func(t *testing.T) {
			t.Parallel()
			got, err := ParseRules(EnvVar, tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
			again, err := ParseRules(EnvVar, got.String())
			if err != nil || !reflect.DeepEqual(again, got) {
				t.Fatalf("round trip %q: %v %v", got.String(), again, err)
			}
		})
	}
	bad := []string{"hotel_writes", "hotel_writes=", "nope=1/s", "hotel_writes=0/s", "hotel_writes=-1/s",
		"hotel_writes=1/d", "hotel_writes=1/s:0", "hotel_writes=1/s:x", "hotel_writes=1/s,hotel_writes=2/s", "hotel_writes=NaN/s",
		"=1/s"}
	for _, in := range bad {
		t.Run("bad "+in, func(t *testing.T) {
			t.Parallel()
			_, err := ParseRules(EnvVar, in)
			if err == nil || !strings.Contains(err.Error(), EnvVar) {
				t.Fatalf("ParseRules(%q) = %v, want an error naming %s", in, err, EnvVar)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	t.Parallel()
	all := Rules{}
	for _, s := range Scopes {
		all[s] = Limit{Rate: 1, Burst: 1}
	}
	guest := Identity{Client: "sub:g1", Guest: "g1"}
	anon := Identity{Client: "ip:10.0.0.1"}
	cases := []struct {
		method, path string
		who          Identity
		want         []string // scope:id
	}{
		{"GET", "/healthz", anon, nil},
		{"GET", "/metrics", anon, nil},
		{"GET", "/v1/hotels/H1/availability", anon, []string{"client_reads:ip:10.0.0.1"}},
		{"POST", "/v1/hotels", guest, []string{"client_writes:sub:g1"}},
		{"PUT", "/v1/hotels/H1/room-types/r/inventory", guest, []string{"client_writes:sub:g1", "hotel_writes:h1"}},
		{"POST", "/v1/hotels/h1/reservations", guest, []string{"client_writes:sub:g1", "hotel_writes:h1", "guest_holds:g1"}},
		{"POST", "/v1/hotels/h1/reservations/r1/confirm", guest, []string{"client_writes:sub:g1", "hotel_writes:h1"}},
		{"POST", "/v1/clinics/c1/appointments", anon, []string{"client_writes:ip:10.0.0.1", "clinic_writes:c1", "guest_holds:ip:10.0.0.1"}},
		{"POST", "/v1/clinics/c1/waiting-room/tickets", anon, []string{"client_writes:ip:10.0.0.1"}},
		{"GET", "/v1/clinics/c1/waiting-room/tickets/x", anon, []string{"client_reads:ip:10.0.0.1"}},
		{"POST", "/v1/payments/webhook", anon, []string{"client_writes:ip:10.0.0.1"}},
	}
	for _, tc := range cases {
		t.Run(tc.method+" "+tc.path, func(t *testing.T) {
			t.Parallel()
			var got []string
			for _, c := range Classify(all, tc.method, tc.path, tc.who) {
				got = append(got, c.Scope+":"+c.ID)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
	if got := Classify(Rules{}, "POST", "/v1/hotels/h1/reservations", guest); got != nil {
		t.Fatalf("no rules: got %v", got)
	}
}

func TestRemoteIP(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"10.1.2.3:5555":                   "10.1.2.3",
		"[2001:db8:1:2:3:4:5:6]:443":      "2001:db8:1:2::/64",
		"[::ffff:10.1.2.3]:1":             "10.1.2.3",
		"not-an-address":                  "not-an-address",
		"[2001:db8:1:2:ffff:ffff:0:1]:80": "2001:db8:1:2::/64",
	} {
		r := &http.Request{RemoteAddr: in}
		if got := RemoteIP(r); got != want {
			t.Errorf("RemoteIP(%q) = %q, want %q", in, got, want)
		}
	}
}
