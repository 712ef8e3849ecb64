package telemetry

import "testing"

// NATS keeps header names as written: Get finds a name in any case.
func TestHeaderCarrierGetAnyCase(t *testing.T) {
	const tp = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	for _, name := range []string{"traceparent", "Traceparent", "TRACEPARENT", "TraceParent"} {
		c := HeaderCarrier{"Ce-Id": {"e1"}, name: {tp}}
		if got := c.Get("traceparent"); got != tp {
			t.Errorf("header %q: Get = %q", name, got)
		}
		if got := c.Get("tracestate"); got != "" {
			t.Errorf("header %q: tracestate = %q, want none", name, got)
		}
	}
	if got := (HeaderCarrier{"traceparent": {}}).Get("traceparent"); got != "" {
		t.Errorf("an empty header: Get = %q", got)
	}
}
