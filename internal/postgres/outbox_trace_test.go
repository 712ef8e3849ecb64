package postgres

import (
	"context"
	"encoding/json"
	"testing"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// An outbox row keeps the W3C trace context of the writing request, and
// only that; an untraced write stores NULL and a damaged value is dropped.
func TestOutboxTraceContext(t *testing.T) {
	t.Parallel()
	if tc := traceContext(context.Background()); tc != nil {
		t.Errorf("untraced write stores %q, want NULL", *tc)
	}
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ts, _ := trace.ParseTraceState("berth=1")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled, TraceState: ts}))
	tc := traceContext(ctx)
	if tc == nil {
		t.Fatal("traced write stores NULL")
	}
	got := decodeTraceContext(tc)
	if got["traceparent"] != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" || got["tracestate"] != "berth=1" || len(got) != 2 {
		t.Errorf("stored %s, decoded %v", *tc, got)
	}
	for _, bad := range []string{"", "not json", `{"tracestate":"x"}`} {
		if got := decodeTraceContext(&bad); got != nil {
			t.Errorf("decode %q = %v, want nil", bad, got)
		}
	}
}

// traceContextByMap is traceContext as it was written first: the
// propagator's map carrier, encoded by encoding/json.
func traceContextByMap(ctx context.Context) *string {
	c := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(ctx, c)
	if c["traceparent"] == "" {
		return nil
	}
	b, err := json.Marshal(c)
	if err != nil {
		return nil
	}
	s := string(b)
	return &s
}

// FuzzTraceContext: the trace context an outbox row stores is the bytes
// of the map carrier's encoding, whatever the span's ids, flags and
// tracestate (its values may hold what JSON escapes: <, >, &, ", \).
func FuzzTraceContext(f *testing.F) {
	f.Add([]byte("4bf92f3577b34da6a3ce929d0e0e4736"), []byte("00f067aa"), byte(1), "berth=1", false)
	f.Add([]byte("x"), []byte("y"), byte(0xff), `a=<b>&c,k@v="q\`, true)
	f.Add([]byte{}, []byte{}, byte(0), "", false)
	f.Add([]byte("0123456789abcdef"), []byte("01234567"), byte(2), "", true)
	f.Fuzz(func(t *testing.T, traceID, spanID []byte, flags byte, state string, remote bool) {
		var cfg trace.SpanContextConfig
		copy(cfg.TraceID[:], traceID)
		copy(cfg.SpanID[:], spanID)
		cfg.TraceFlags, cfg.Remote = trace.TraceFlags(flags), remote
		if ts, err := trace.ParseTraceState(state); err == nil {
			cfg.TraceState = ts
		}
		ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(cfg))
		got, want := traceContext(ctx), traceContextByMap(ctx)
		if (got == nil) != (want == nil) || got != nil && *got != *want {
			t.Fatalf("traceContext %v, the map's encoding %v", deref(got), deref(want))
		}
	})
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// BenchmarkTraceContext is the trace context a traced write stores.
func BenchmarkTraceContext(b *testing.B) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled}))
	for _, c := range []struct {
		name string
		f    func(context.Context) *string
	}{{"carrier", traceContext}, {"map", traceContextByMap}} {
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if c.f(ctx) == nil {
					b.Fatal("no trace context")
				}
			}
		})
	}
}
