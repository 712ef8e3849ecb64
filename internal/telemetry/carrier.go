package telemetry

import (
	"net/http"

	"go.opentelemetry.io/otel/propagation"
)

// httpCarrier is propagation.HeaderCarrier without its cost on every hop:
// the propagators ask for their headers by lower-case name ("traceparent",
// "tracestate", "baggage"), which http.Header canonicalizes into a newly
// allocated string on each Get and Set — three to six per request between
// the router, its hop and the booking service. Those names are mapped to
// their canonical form here; any other key is canonicalized as
// http.Header does, so the carrier reads and writes exactly the header
// entries propagation.HeaderCarrier would.
type httpCarrier http.Header

var (
	_ propagation.TextMapCarrier = httpCarrier{}
	_ propagation.ValuesGetter   = httpCarrier{}
)

// canonicalKey is http.CanonicalHeaderKey(key), without an allocation for
// the propagators' own header names.
func canonicalKey(key string) string {
	switch key {
	case "traceparent":
		return "Traceparent"
	case "tracestate":
		return "Tracestate"
	case "baggage":
		return "Baggage"
	}
	return http.CanonicalHeaderKey(key)
}

func (c httpCarrier) Get(key string) string {
	if v := c[canonicalKey(key)]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func (c httpCarrier) Values(key string) []string { return c[canonicalKey(key)] }

func (c httpCarrier) Set(key, value string) { c[canonicalKey(key)] = []string{value} }

func (c httpCarrier) Keys() []string { return propagation.HeaderCarrier(c).Keys() }
