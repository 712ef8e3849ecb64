package telemetry

import (
	"context"
	"strings"

	"go.opentelemetry.io/otel"
)

// Trace context crosses NATS in message headers, as it crosses HTTP: the
// publisher injects traceparent (and baggage) into the message's headers,
// the consumer extracts it and starts its span as a child. nats.Header is a
// map[string][]string, so both functions take one directly:
//
//	msg := nats.NewMsg(subject)
//	telemetry.InjectHeaders(ctx, msg.Header)
//	…
//	ctx := telemetry.ExtractHeaders(ctx, msg.Header)

// InjectHeaders writes the trace context of ctx into h (which must not be
// nil).
func InjectHeaders(ctx context.Context, h map[string][]string) {
	otel.GetTextMapPropagator().Inject(ctx, HeaderCarrier(h))
}

// ExtractHeaders returns ctx carrying the remote span context found in h, if
// any.
func ExtractHeaders(ctx context.Context, h map[string][]string) context.Context {
	if len(h) == 0 {
		return ctx
	}
	return otel.GetTextMapPropagator().Extract(ctx, HeaderCarrier(h))
}

// HeaderCarrier adapts NATS headers to propagation.TextMapCarrier. NATS
// keeps header names as written (it does not canonicalise them like HTTP),
// so Get tries the name as given, then any case of it.
type HeaderCarrier map[string][]string

// Get returns the first value of key.
//
// It runs for every consumed message (twice: traceparent and the usually
// absent tracestate), so it allocates nothing: the loop over the few
// headers finds the canonical form too, without building it.
func (c HeaderCarrier) Get(key string) string {
	if v := c[key]; len(v) > 0 {
		return v[0]
	}
	for k, v := range c {
		if len(v) > 0 && strings.EqualFold(k, key) {
			return v[0]
		}
	}
	return ""
}

// Set replaces the values of key.
func (c HeaderCarrier) Set(key, value string) { c[key] = []string{value} }

// Keys lists the header names.
func (c HeaderCarrier) Keys() []string {
	keys := make([]string, 0, len(c))
	for k := range c {
		keys = append(keys, k)
	}
	return keys
}
