package natsbus

import (
	"context"
	"testing"

	"github.com/berthhq/berth/internal/events"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// The relay's producer span is the child of the trace context stored with
// the outbox row, and the message carries the producer span's context; the
// consumer's span is the child of what the headers carry. An untraced event
// makes no span and carries no traceparent.
func TestTraceCrossesTheBus(t *testing.T) {
	t.Parallel()
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	tr := tracer(tp)
	rec := events.Record{PartitionID: "8d0b6a8e-0f39-4d3c-9a55-3c1c1f1f6a01", EventID: "e1", Kind: "hotel",
		Type: "reservation.confirmed", Payload: []byte(`{}`),
		TraceContext: map[string]string{"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"}}

	ctx, pub := startPublish(context.Background(), tr, rec, "s")
	msg, err := message(ctx, rec)
	if err != nil {
		t.Fatal(err)
	}
	pub.End()
	ctx, con := startConsume(context.Background(), tr, "readmodel", msg.Header, Message{Subject: "s", Event: events.FromRecord(rec)})
	con.End()
	got := spans.GetSpans()
	if len(got) != 2 {
		t.Fatalf("%d spans, want publish and consume", len(got))
	}
	p, c := got[0], got[1]
	if p.Name != "publish reservation.confirmed" || p.SpanKind != trace.SpanKindProducer ||
		p.Parent.SpanID().String() != "00f067aa0ba902b7" || p.SpanContext.TraceID().String() != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("publish span %q kind %v parent %v", p.Name, p.SpanKind, p.Parent)
	}
	if c.Name != "consume reservation.confirmed" || c.SpanKind != trace.SpanKindConsumer || c.Parent.SpanID() != p.SpanContext.SpanID() ||
		trace.SpanContextFromContext(ctx).SpanID() != c.SpanContext.SpanID() {
		t.Errorf("consume span %q kind %v parent %v, want the publish span %v", c.Name, c.SpanKind, c.Parent, p.SpanContext.SpanID())
	}

	rec.TraceContext = nil
	ctx, pub = startPublish(context.Background(), tr, rec, "s")
	pub.End()
	msg, _ = message(ctx, rec)
	if msg.Header.Get("traceparent") != "" {
		t.Errorf("untraced event carries traceparent %q", msg.Header.Get("traceparent"))
	}
	_, con = startConsume(context.Background(), tr, "readmodel", msg.Header, Message{Subject: "s"})
	con.End()
	if n := len(spans.GetSpans()); n != 2 {
		t.Errorf("an untraced event made %d spans", n-2)
	}
}
