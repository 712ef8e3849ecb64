// Package wan describes the wide-area network between Berth's regions as the
// local stack simulates it: the round-trip time of each pair of regions and
// the plan of proxies that put those delays between every router and the
// services of the other regions (`make up WAN=1`, deploy/local/wan). It
// imports only the standard library.
package wan

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"
	"time"
)

// rtts are round-trip times between cloud regions of the three continents,
// as public inter-region latency tables give them (Virginia–Ireland,
// Virginia–Mumbai, Ireland–Mumbai).
var rtts = map[[2]string]time.Duration{
	{"eu-west", "us-east"}:  75 * time.Millisecond,
	{"ap-south", "us-east"}: 190 * time.Millisecond,
	{"ap-south", "eu-west"}: 120 * time.Millisecond,
}

// RTT returns the round-trip time between two regions: 0 within a region,
// and ok false for a pair the table does not know.
func RTT(a, b string) (time.Duration, bool) {
	if a == b {
		return 0, true
	}
	if a > b {
		a, b = b, a
	}
	d, ok := rtts[[2]string{a, b}]
	return d, ok
}

// ReadModelRegion is where the local stack's single read model stands: the
// routers of the other regions reach it across the WAN.
const ReadModelRegion = "us-east"

// Link is one simulated path: the router of From reaching a service of To.
// Each direction is delayed by half the round trip, ± Jitter.
type Link struct {
	Name     string        `json:"name"`    // e.g. "eu-west-to-us-east-booking"
	From     string        `json:"from"`    // the router's region
	To       string        `json:"to"`      // the service's region
	Service  string        `json:"service"` // booking or readmodel
	Listen   string        `json:"listen"`  // host:port of the proxy
	Upstream string        `json:"upstream"`
	OneWay   time.Duration `json:"one_way"`
	Jitter   time.Duration `json:"jitter"`
}

// URL is the proxy's base URL, to configure the router of From with.
func (l Link) URL() string { return "http://" + l.Listen }

// JitterShare is the jitter as a share of the one-way delay: real paths
// between continents vary by a few percent from one packet to the next.
const JitterShare = 0.1

// Plan lays out the proxies for regions (in order): for every router, one
// per other region's booking service and one to the read model when it
// stands in another region. bookings maps a region to its booking service's
// base URL; readModel is the read model's ("" = none). Ports are
// basePort + 10·i + j (router i, booking j) and basePort + 10·i + 9 (read
// model), on the host of the upstream.
func Plan(regions []string, bookings map[string]string, readModel string, basePort int) ([]Link, error) {
	if len(regions) > 9 {
		return nil, fmt.Errorf("wan: at most 9 regions, got %d", len(regions))
	}
	var links []Link
	add := func(from, to, service, base string, port int) error {
		rtt, ok := RTT(from, to)
		if !ok {
			return fmt.Errorf("wan: no round-trip time for %s–%s", from, to)
		}
		u, err := url.Parse(base)
		if err != nil || u.Host == "" {
			return fmt.Errorf("wan: %s of %s: %q is not a base URL", service, to, base)
		}
		host := u.Hostname()
		one := rtt / 2
		links = append(links, Link{Name: from + "-to-" + to + "-" + service, From: from, To: to, Service: service,
			Listen: net.JoinHostPort(host, strconv.Itoa(port)), Upstream: u.Host,
			OneWay: one, Jitter: time.Duration(float64(one) * JitterShare)})
		return nil
	}
	for i, from := range regions {
		for j, to := range regions {
			if i == j {
				continue
			}
			b, ok := bookings[to]
			if !ok {
				return nil, fmt.Errorf("wan: no booking URL for %s", to)
			}
			if err := add(from, to, "booking", b, basePort+10*i+j); err != nil {
				return nil, err
			}
		}
		if readModel != "" && from != ReadModelRegion && slices.Contains(regions, ReadModelRegion) {
			if err := add(from, ReadModelRegion, "readmodel", readModel, basePort+10*i+9); err != nil {
				return nil, err
			}
		}
	}
	return links, nil
}

// RouterURLs returns, for the router of region, the booking URLs it should
// use (its own region direct, the others through their links) and its read
// model URL.
func RouterURLs(links []Link, region string, bookings map[string]string, readModel string) (map[string]string, string) {
	out := map[string]string{region: bookings[region]}
	rm := readModel
	for _, l := range links {
		if l.From != region {
			continue
		}
		switch l.Service {
		case "booking":
			out[l.To] = l.URL()
		case "readmodel":
			rm = l.URL()
		}
	}
	return out, rm
}
