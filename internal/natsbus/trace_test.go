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

	// A consumer that reads only subjects names its span by the subject's
	// event type too.
	_, sub := startConsume(context.Background(), tr, "search-cache", msg.Header,
		Message{Subject: events.Subject(rec.Kind, rec.PartitionID, rec.Type)})
	sub.End()
	if got := spans.GetSpans(); len(got) != 3 || got[2].Name != "consume reservation.confirmed" {
		t.Errorf("a subject-only consumer's span: %d spans, last %q", len(got), got[len(got)-1].Name)
	} else if id := attr(got[2], "messaging.message.id"); id != "e1" {
		t.Errorf("a subject-only consumer's span has message id %q, want the event's (e1)", id)
	}
	spans.Reset()

	rec.TraceContext = nil
	ctx, pub = startPublish(context.Background(), tr, rec, "s")
	pub.End()
	msg, _ = message(ctx, rec)
	if msg.Header.Get("traceparent") != "" {
		t.Errorf("untraced event carries traceparent %q", msg.Header.Get("traceparent"))
	}
	_, con = startConsume(context.Background(), tr, "readmodel", msg.Header, Message{Subject: "s"})
	con.End()
	if n := len(spans.GetSpans()); n != 0 {
		t.Errorf("an untraced event made %d spans", n)
	}
}

// attr is the value of a span's attribute, or "".
func attr(sp tracetest.SpanStub, key string) string {
	for _, kv := range sp.Attributes {
		if string(kv.Key) == key {
			return kv.Value.Emit()
		}
	}
	return ""
}
