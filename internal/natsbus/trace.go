package natsbus

import (
	"context"

	"github.com/berthhq/berth/internal/events"
	"github.com/berthhq/berth/internal/telemetry"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// A request's trace crosses the bus like this: the booking transaction
// stores the request's W3C trace context with each outbox row; the relay
// starts a producer span ("publish <type>") as its child and sends that
// span's context in the message headers (traceparent, tracestate); every
// consumer runs its handler under a consumer span ("consume <type>") that
// is the child of the producer, so the consumer's queries join the trace.
//
// Only the W3C trace context crosses, with its own propagator rather than
// the global one: it is what the outbox stores, and a process that never
// set a global propagator must still pass the trace on. An event without a
// trace context (the expiry sweeper's, a replay of old rows) makes no span,
// as untraced queries make none.
var traceContext propagation.TraceContext

const tracerName = "github.com/berthhq/berth/internal/natsbus"

// noSpan records nothing; ending it is harmless (unlike ending a span the
// caller's context happened to carry).
var noSpan = trace.SpanFromContext(context.Background())

// tracer is tp's tracer, or the global provider's when tp is nil.
func tracer(tp trace.TracerProvider) trace.Tracer {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return tp.Tracer(tracerName)
}

// startPublish starts the producer span of one outbox record as a child of
// the trace context stored with it. With no stored context it returns ctx
// and a span that records nothing.
func startPublish(ctx context.Context, tr trace.Tracer, rec events.Record, subject string) (context.Context, trace.Span) {
	parent := traceContext.Extract(ctx, propagation.MapCarrier(rec.TraceContext))
	if !trace.SpanContextFromContext(parent).IsValid() {
		return ctx, noSpan
	}
	ctx, span := tr.Start(parent, "publish "+rec.Type, producer)
	if span.IsRecording() {
		span.SetAttributes(
			semconv.MessagingSystemKey.String("nats"),
			semconv.MessagingOperationTypeSend,
			semconv.MessagingOperationName("publish"),
			semconv.MessagingDestinationName(subject),
			semconv.MessagingMessageID(rec.EventID),
		)
	}
	return ctx, span
}

// The span kinds as start options, made once. A request's trace context
// travels with its events whether or not the request was sampled (W3C
// propagation), so every event starts a span; with tracing off (the
// default sampler follows the unsampled parent) the span records nothing,
// and its attributes, set only on a recording span, are not built at all.
var (
	producer = trace.WithSpanKind(trace.SpanKindProducer)
	consumer = trace.WithSpanKind(trace.SpanKindConsumer)
)

// startConsume starts the consumer span of one delivery as a child of the
// trace context in its headers. With none it returns ctx and a span that
// records nothing.
func startConsume(ctx context.Context, tr trace.Tracer, durable string, headers map[string][]string, m Message) (context.Context, trace.Span) {
	parent := traceContext.Extract(ctx, telemetry.HeaderCarrier(headers))
	if !trace.SpanContextFromContext(parent).IsValid() {
		return ctx, noSpan
	}
	typ := m.Event.Type
	if typ == "" {
		// A consumer that reads only subjects (SubjectOnly) names the span
		// like the others, by the event type in the subject; an unroutable
		// message by its subject.
		if _, _, t, err := ParseSubject(m.Subject); err == nil {
			typ = t
		} else {
			typ = m.Subject
		}
	}
	ctx, span := tr.Start(parent, "consume "+typ, consumer)
	if span.IsRecording() {
		span.SetAttributes(
			semconv.MessagingSystemKey.String("nats"),
			semconv.MessagingOperationTypeProcess,
			semconv.MessagingOperationName("consume"),
			semconv.MessagingDestinationName(m.Subject),
			semconv.MessagingConsumerGroupName(durable),
		)
		id := m.Event.ID
		if id == "" {
			id = telemetry.HeaderCarrier(headers).Get("Ce-Id") // the relay's copy of the event id
		}
		if id != "" {
			span.SetAttributes(semconv.MessagingMessageID(id))
		}
	}
	return ctx, span
}

// endSpan ends span, marking it failed when err is not nil.
func endSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// injectHeaders writes the trace context of ctx (if any) into h.
func injectHeaders(ctx context.Context, h map[string][]string) {
	traceContext.Inject(ctx, telemetry.HeaderCarrier(h))
}
