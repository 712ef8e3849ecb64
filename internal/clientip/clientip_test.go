package clientip

import (
	"net/http"
	"strings"
	"testing"
)

func request(remote string, xff ...string) *http.Request {
	r, _ := http.NewRequest(http.MethodGet, "http://router/", nil)
	r.RemoteAddr = remote
	for _, v := range xff {
		r.Header.Add("X-Forwarded-For", v)
	}
	return r
}

func TestClient(t *testing.T) {
	t.Parallel()
	lb, err := Parse(EnvVar, "10.0.0.0/8, 192.0.2.7, 2001:db8:ff::/48")
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name    string
		proxies Proxies
		remote  string
		xff     []string
		want    string
	}{
		{"no setting: the peer, whatever the header says", Proxies{}, "203.0.113.9:4000", []string{"1.2.3.4"}, "203.0.113.9"},
		{"untrusted peer: its header is ignored", lb, "203.0.113.9:4000", []string{"1.2.3.4"}, "203.0.113.9"},
		{"trusted peer: the client it saw", lb, "10.1.2.3:4000", []string{"198.51.100.20"}, "198.51.100.20"},
		{"a spoofed entry left of the real client is skipped", lb, "10.1.2.3:4000", []string{"1.2.3.4, 198.51.100.20"}, "198.51.100.20"},
		{"two trusted hops", lb, "10.1.2.3:4000", []string{"1.2.3.4, 198.51.100.20, 192.0.2.7"}, "198.51.100.20"},
		{"several header lines read as one list", lb, "10.1.2.3:4000", []string{"1.2.3.4", "198.51.100.20", "10.9.9.9"}, "198.51.100.20"},
		{"every hop trusted: the leftmost", lb, "10.1.2.3:4000", []string{"10.5.5.5, 192.0.2.7"}, "10.5.5.5"},
		{"trusted peer without a header: the peer", lb, "10.1.2.3:4000", nil, "10.1.2.3"},
		{"garbage ends the walk at the last good hop", lb, "10.1.2.3:4000", []string{"198.51.100.20, not-an-ip, 10.2.2.2"}, "10.2.2.2"},
		{"garbage right at the peer", lb, "10.1.2.3:4000", []string{"<script>"}, "10.1.2.3"},
		{"entries with ports", lb, "10.1.2.3:4000", []string{"[2001:db8::5]:443, 198.51.100.20:5000"}, "198.51.100.20"},
		{"IPv6 proxies and clients", lb, "[2001:db8:ff::1]:4000", []string{"2001:db8:1::7"}, "2001:db8:1::7"},
		{"IPv4-mapped peer counts as IPv4", lb, "[::ffff:10.1.2.3]:4000", []string{"198.51.100.20"}, "198.51.100.20"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got := c.proxies.Client(request(c.remote, c.xff...)).String(); got != c.want {
				t.Fatalf("Client = %s, want %s", got, c.want)
			}
		})
	}
}

func TestParse(t *testing.T) {
	t.Parallel()
	for _, bad := range []string{"10.0.0.0/33", "nonsense", "10.0.0/8", "::1/200"} {
		if _, err := Parse(EnvVar, "10.0.0.0/8,"+bad); err == nil || !strings.Contains(err.Error(), EnvVar) {
			t.Errorf("Parse(%q) = %v, want an error naming %s", bad, err, EnvVar)
		}
	}
	p, err := Parse(EnvVar, " , 10.1.2.3/8 ,::ffff:192.0.2.0/120")
	if err != nil || p.String() != "10.0.0.0/8,192.0.2.0/24" {
		t.Fatalf("Parse = %q, %v", p.String(), err)
	}
	if p, err := Parse(EnvVar, ""); err != nil || !p.Empty() {
		t.Fatalf("empty setting: %v %v", p, err)
	}
}

func TestForwardHeader(t *testing.T) {
	t.Parallel()
	lb, _ := Parse(EnvVar, "10.0.0.0/8")
	if got := lb.ForwardHeader(request("203.0.113.9:1", "1.2.3.4")); got != "203.0.113.9" {
		t.Errorf("from an untrusted peer: %q, want only the peer", got)
	}
	if got := lb.ForwardHeader(request("10.0.0.1:1", "1.2.3.4, 198.51.100.20")); got != "1.2.3.4, 198.51.100.20, 10.0.0.1" {
		t.Errorf("from a trusted proxy: %q", got)
	}
	if got := (Proxies{}).ForwardHeader(request("10.0.0.1:1", "1.2.3.4")); got != "10.0.0.1" {
		t.Errorf("without the setting: %q", got)
	}
}
