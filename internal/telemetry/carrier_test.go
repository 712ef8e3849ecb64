package telemetry

import (
	"context"
	"net/http"
	"slices"
	"testing"

	"go.opentelemetry.io/otel/baggage"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The carrier reads and writes the same header entries as
// propagation.HeaderCarrier, for the propagators' names and any other.
func TestHTTPCarrierIsHeaderCarrier(t *testing.T) {
	header := func() http.Header {
		return http.Header{
			"Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
			"Tracestate":  {"congo=t61rcWkgMzE"},
			"Baggage":     {"a=1", "b=2"},
			"X-Custom":    {"one", "two"},
			"lower-key":   {"not canonical"}, // set as a raw map entry: neither carrier finds it
		}
	}
	keys := []string{"traceparent", "Traceparent", "TRACEPARENT", "tracestate", "baggage", "x-custom",
		"X-CUSTOM", "lower-key", "missing", "", "bad key"}
	ours, theirs := httpCarrier(header()), propagation.HeaderCarrier(header())
	for _, k := range keys {
		if g, w := ours.Get(k), theirs.Get(k); g != w {
			t.Errorf("Get(%q) = %q, HeaderCarrier's %q", k, g, w)
		}
		if g, w := ours.Values(k), theirs.Values(k); !slices.Equal(g, w) {
			t.Errorf("Values(%q) = %q, HeaderCarrier's %q", k, g, w)
		}
	}
	for _, k := range keys {
		ours.Set(k, "v-"+k)
		theirs.Set(k, "v-"+k)
	}
	if g, w := http.Header(ours), http.Header(theirs); !equalHeaders(g, w) {
		t.Errorf("after Set: %v, HeaderCarrier's %v", g, w)
	}
	gk, wk := ours.Keys(), theirs.Keys()
	slices.Sort(gk)
	slices.Sort(wk)
	if !slices.Equal(gk, wk) {
		t.Errorf("Keys() = %q, HeaderCarrier's %q", gk, wk)
	}
}

// The binaries' propagator extracts the same trace context and baggage
// through either carrier and injects the same headers.
func TestHTTPCarrierPropagates(t *testing.T) {
	prop := propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
	in := http.Header{
		"Traceparent": {"00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"},
		"Tracestate":  {"congo=t61rcWkgMzE"},
		"Baggage":     {"a=1", "b=2"},
	}
	ctx := prop.Extract(context.Background(), httpCarrier(in))
	want := prop.Extract(context.Background(), propagation.HeaderCarrier(in))
	if g, w := trace.SpanContextFromContext(ctx), trace.SpanContextFromContext(want); !g.Equal(w) || !g.IsValid() {
		t.Fatalf("span context %v, HeaderCarrier's %v", g, w)
	}
	if g, w := baggage.FromContext(ctx), baggage.FromContext(want); !sameBaggage(g, w) || g.Len() != 2 {
		t.Fatalf("baggage %v, HeaderCarrier's %v", g, w)
	}
	ours, theirs := http.Header{}, http.Header{}
	prop.Inject(ctx, httpCarrier(ours))
	prop.Inject(ctx, propagation.HeaderCarrier(theirs))
	// The baggage header's members come in map order: compared parsed.
	gb, err1 := baggage.Parse(ours.Get("Baggage"))
	wb, err2 := baggage.Parse(theirs.Get("Baggage"))
	if err1 != nil || err2 != nil || !sameBaggage(gb, wb) {
		t.Fatalf("injected baggage %v, HeaderCarrier's %v", ours, theirs)
	}
	ours.Del("Baggage")
	theirs.Del("Baggage")
	if !equalHeaders(ours, theirs) || len(ours) != 2 {
		t.Fatalf("injected %v, HeaderCarrier's %v", ours, theirs)
	}
	// What the carrier is for: no allocation to find the propagators'
	// headers (http.Header canonicalizes "traceparent" into a new string).
	if n := testing.AllocsPerRun(100, func() { _ = httpCarrier(in).Get("traceparent") }); n != 0 {
		t.Errorf("Get(traceparent) allocates %v times", n)
	}
}

func equalHeaders(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || !slices.Equal(v, w) {
			return false
		}
	}
	return true
}

func sameBaggage(a, b baggage.Baggage) bool {
	if a.Len() != b.Len() {
		return false
	}
	for _, m := range a.Members() {
		if b.Member(m.Key()).Value() != m.Value() {
			return false
		}
	}
	return true
}
