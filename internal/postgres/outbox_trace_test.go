package postgres

import (
	"context"
	"testing"

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
