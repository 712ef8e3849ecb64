// Package clientip finds the address of the client behind an HTTP request:
// the connection's peer, or — only when that peer is a configured trusted
// proxy — the rightmost address of X-Forwarded-For that is not itself a
// trusted proxy. A client can write anything into X-Forwarded-For; only the
// hops our own proxies appended are believed, so a spoofed header never buys
// a fresh rate-limit budget or another place in a waiting room. It imports
// only the standard library.
package clientip

import (
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
)

// EnvVar names the setting: comma-separated CIDRs (or single addresses) of
// the proxies in front of the router, e.g. "10.0.0.0/8,192.0.2.7".
const EnvVar = "BERTH_TRUSTED_PROXIES"

// Proxies is the set of trusted proxy networks; the zero value trusts
// nobody, and the peer address is the client.
type Proxies struct {
	nets []netip.Prefix
}

// Parse reads a comma-separated list of CIDRs or addresses; "" trusts
// nobody. Errors name the variable and the entry.
func Parse(name, v string) (Proxies, error) {
	var p Proxies
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if !strings.Contains(part, "/") {
			a, err := netip.ParseAddr(part)
			if err != nil {
				return Proxies{}, fmt.Errorf("%s: %q: want a CIDR such as 10.0.0.0/8 or an address", name, part)
			}
			a = a.Unmap()
			part = netip.PrefixFrom(a, a.BitLen()).String()
		}
		pfx, err := netip.ParsePrefix(part)
		if err != nil {
			return Proxies{}, fmt.Errorf("%s: %q: want a CIDR such as 10.0.0.0/8 or an address", name, part)
		}
		if pfx.Addr().Is4In6() {
			pfx = netip.PrefixFrom(pfx.Addr().Unmap(), pfx.Bits()-96)
		}
		p.nets = append(p.nets, pfx.Masked())
	}
	return p, nil
}

// Empty reports whether no proxy is trusted.
func (p Proxies) Empty() bool { return len(p.nets) == 0 }

// String lists the trusted networks.
func (p Proxies) String() string {
	s := make([]string, len(p.nets))
	for i, n := range p.nets {
		s[i] = n.String()
	}
	return strings.Join(s, ",")
}

// Trusted reports whether a is a trusted proxy.
func (p Proxies) Trusted(a netip.Addr) bool {
	a = a.Unmap()
	for _, n := range p.nets {
		if n.Contains(a) {
			return true
		}
	}
	return false
}

// Peer returns the connection's peer address of r (invalid if RemoteAddr
// does not parse, as with some test transports).
func Peer(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	a, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return a.Unmap()
}

// Client returns the client's address. Without trusted proxies, or when the
// peer is not one, it is the peer. Otherwise X-Forwarded-For is read from
// the right: each hop that is a trusted proxy passes the question one step
// left, and the first that is not is the client. An entry that does not
// parse ends the walk at the last address known good (a trusted proxy
// would never have appended it). When every hop is trusted, the leftmost is
// the client.
func (p Proxies) Client(r *http.Request) netip.Addr {
	peer := Peer(r)
	if len(p.nets) == 0 || !peer.IsValid() || !p.Trusted(peer) {
		return peer
	}
	hops := forwardedFor(r.Header)
	client := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, err := netip.ParseAddr(hops[i])
		if err != nil {
			return client
		}
		client = a.Unmap()
		if !p.Trusted(client) {
			return client
		}
	}
	return client
}

// forwardedFor returns every X-Forwarded-For entry, left to right, over
// all the header's lines. An entry with a port ("192.0.2.1:5000",
// "[2001:db8::1]:80") keeps only the address.
func forwardedFor(h http.Header) []string {
	var out []string
	for _, line := range h.Values("X-Forwarded-For") {
		for _, e := range strings.Split(line, ",") {
			e = strings.TrimSpace(e)
			if host, _, err := net.SplitHostPort(e); err == nil {
				e = host
			}
			out = append(out, strings.Trim(e, "[]"))
		}
	}
	return out
}

// ForwardHeader is the X-Forwarded-For a proxy sends upstream for r: from a
// trusted proxy, the header it sent followed by the peer (the next hop reads
// it with the same rule as Client); from anyone else only the peer, so what
// a client wrote is never passed on as if a proxy had vouched for it.
func (p Proxies) ForwardHeader(r *http.Request) string {
	peer := Peer(r)
	if !peer.IsValid() {
		return ""
	}
	if len(p.nets) == 0 || !p.Trusted(peer) {
		return peer.String()
	}
	prior := strings.Join(r.Header.Values("X-Forwarded-For"), ", ")
	if prior == "" {
		return peer.String()
	}
	return prior + ", " + peer.String()
}
