package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/natsbus"
	"github.com/berthhq/berth/internal/natsbus/natstest"
	"github.com/berthhq/berth/internal/placement"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/readmodel"
	"github.com/berthhq/berth/internal/router"
	"github.com/berthhq/berth/internal/telemetry"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
)

// One confirmed booking is one trace across the three services and the
// database: the client's span → the router (server span, and the client
// span of its upstream call) → the booking service (server span, its
// queries, the outbox insert) → the relay's producer span, continued from
// the trace context stored in the outbox row → NATS headers → the read
// model's consumer span → the read model's queries.
//
// The booking service runs as `booking serve` does (run, with its relay);
// the router and the read model's projection are composed from their real
// packages with the same wiring as their binaries. Each service has its own
// tracer provider (so spans carry their service.name), all exporting to one
// in-memory exporter; no global provider is touched.
func TestTraceThroughOutbox(t *testing.T) {
	ctx := context.Background()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	spans := tracetest.NewInMemoryExporter()
	setup := func(service, region string) *telemetry.Telemetry {
		tel, flush, err := telemetry.Setup(ctx, service, region,
			telemetry.WithSyncSpanExporter(spans), telemetry.WithoutGlobals())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = flush(context.Background()) })
		return tel
	}

	ns := natstest.Start(t)
	s := startServiceWith(t, serviceOptions{natsURL: ns.URL, spans: spans})
	h := s.SeedHotel("", 5, 0, bookingtest.Date(0), bookingtest.Date(60))

	// The router of us-east, wired as `router serve` wires it.
	rtel := setup("router", "us-east")
	rdb, err := postgres.Open(ctx, s.DBURL, postgres.Options{MaxConns: 4, Telemetry: rtel})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rdb.Close)
	dir := placement.NewDirectory(postgres.NewPlacements(rdb), quiet)
	if err := dir.Load(ctx); err != nil {
		t.Fatal(err)
	}
	rt, err := router.New(router.Config{Region: "us-east", Bookings: map[string]string{"us-east": s.URL},
		Directory: dir, Logger: quiet, Transport: rtel.Transport(router.NewTransport())})
	if err != nil {
		t.Fatal(err)
	}
	words := map[string]bool{"v1": true, "hotels": true, "reservations": true, "confirm": true}
	rsrv := httptest.NewServer(rtel.Middleware(telemetry.Routed(func(r *http.Request) string {
		return telemetry.PathTemplate(r.URL.Path, words)
	}, rt)))
	t.Cleanup(rsrv.Close)

	// The read model's projection, wired as `readmodel serve` wires it.
	mtel := setup("readmodel", "")
	mdb, err := postgres.Open(ctx, s.DBURL, postgres.Options{MaxConns: 8, Telemetry: mtel})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mdb.Close)
	view := postgres.NewReadModel(mdb)
	nc, err := natsbus.Connect(ns.URL, "berth-readmodel", quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := natsbus.NewJetStream(nc, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	consumeCtx, stopConsume := context.WithCancel(ctx)
	consumed := make(chan error, 1)
	go func() {
		consumed <- natsbus.Consume(consumeCtx, js, natsbus.ConsumerConfig{Durable: readmodel.ConsumerName,
			Log: quiet, TracerProvider: mtel.TracerProvider()}, readmodel.NewProjector(view, quiet).Handle)
	}()
	t.Cleanup(func() { stopConsume(); <-consumed }) // runs before the pool closes

	// The guest's client: its span is the root of the trace.
	client := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName("test-client"))))
	t.Cleanup(func() { _ = client.Shutdown(context.Background()) })
	cctx, root := client.Tracer("test").Start(ctx, "guest books a room", trace.WithSpanKind(trace.SpanKindClient))
	traceID := root.SpanContext().TraceID()
	hdr := propagation.MapCarrier{}
	propagation.TraceContext{}.Inject(cctx, hdr)

	edge := &bookingtest.Env{T: t, URL: rsrv.URL, Tokens: s.Tokens, Client: s.Client, Store: s.Store}
	guest := s.Token("g1", berth.RoleGuest)
	path := "/v1/hotels/" + h.ID + "/reservations"
	hold := edge.Do(bookingtest.Request{Method: "POST", Path: path, Token: guest, IdemKey: bookingtest.NewKey(), Header: hdr,
		Body: map[string]any{"guest_id": "g1", "room_type_id": h.RoomTypeID,
			"check_in": bookingtest.Date(30), "check_out": bookingtest.Date(32), "quantity": 1}})
	if hold.Status != http.StatusCreated {
		t.Fatalf("hold through the router: %d %s", hold.Status, hold.Body)
	}
	id, _ := hold.JSON()["reservation_id"].(string)
	// The projection applies events that arrive together in one round,
	// traced beneath the first of them (ADR 0021): the confirm waits until
	// the hold is in the view, so that its own consumer span writes it.
	waitFor(t, "the read model shows the hold", func() bool {
		_, err := view.Get(ctx, "hotel", h.ID, id)
		return err == nil
	})
	ref := s.PayHold(hold) // the guest pays the hold's intent with the provider
	confirm := edge.Do(bookingtest.Request{Method: "POST", Path: path + "/" + id + "/confirm", Token: guest,
		IdemKey: bookingtest.NewKey(), Header: hdr, Body: map[string]any{"payment_ref": ref}})
	if confirm.Status != http.StatusOK {
		t.Fatalf("confirm through the router: %d %s", confirm.Status, confirm.Body)
	}
	root.End()

	waitFor(t, "the read model shows the confirmed booking", func() bool {
		it, err := view.Get(ctx, "hotel", h.ID, id)
		return err == nil && it.Status == "confirmed"
	})
	// The consumer span ends just after its transaction committed; spans are
	// exported when they end, so a parent still running (the hold's consumer,
	// say) shows its finished children first. Wait until the tree is whole.
	var tr traceTree
	waitFor(t, "the consumer span of reservation.confirmed and a whole tree", func() bool {
		tr = newTraceTree(spans.GetSpans(), traceID)
		return tr.find(func(sp tracetest.SpanStub) bool { return sp.Name == "consume reservation.confirmed" }) != nil &&
			len(tr.orphans(root.SpanContext().SpanID())) == 0
	})
	t.Logf("trace %s:\n%s", traceID, tr)

	// The chain of the confirm, each step beneath the one before.
	is := func(service string, kind trace.SpanKind, name string) func(tracetest.SpanStub) bool {
		return func(sp tracetest.SpanStub) bool {
			return serviceOf(sp) == service && sp.SpanKind == kind && (name == "" || sp.Name == name)
		}
	}
	chain := []struct {
		what string
		is   func(tracetest.SpanStub) bool
	}{
		{"router server span", is("router", trace.SpanKindServer, "POST /v1/hotels/{id}/reservations/{id}/confirm")},
		{"booking server span", is("booking", trace.SpanKindServer, "POST /v1/hotels/{hotel_id}/reservations/{reservation_id}/confirm")},
		{"relay producer span", is("booking", trace.SpanKindProducer, "publish reservation.confirmed")},
		{"read model consumer span", is("readmodel", trace.SpanKindConsumer, "consume reservation.confirmed")},
	}
	var above *tracetest.SpanStub
	for _, step := range chain {
		sp := tr.find(func(sp tracetest.SpanStub) bool { return step.is(sp) && (above == nil || tr.under(sp, *above)) })
		if sp == nil {
			t.Fatalf("no %s in the trace (beneath the previous step)", step.what)
		}
		above = sp
	}
	bookingServer := tr.find(chain[1].is)
	consumer := tr.find(chain[3].is)
	// The database, on both sides of the outbox.
	var bookingSQL, viewSQL []string
	for _, sp := range tr.spans {
		stmt, ok := dbStatement(sp)
		switch {
		case !ok:
		case serviceOf(sp) == "booking" && tr.under(sp, *bookingServer):
			bookingSQL = append(bookingSQL, stmt)
		case serviceOf(sp) == "readmodel" && tr.under(sp, *consumer):
			viewSQL = append(viewSQL, stmt)
		}
	}
	if !slices.ContainsFunc(bookingSQL, func(q string) bool { return strings.Contains(q, "INSERT INTO outbox") }) {
		t.Errorf("no database span of the confirm inserts its outbox row; statements:\n%s", strings.Join(bookingSQL, "\n"))
	}
	if !slices.ContainsFunc(viewSQL, func(q string) bool { return strings.Contains(q, "rm_reservations") }) {
		t.Errorf("no database span of the read model writes the view; statements:\n%s", strings.Join(viewSQL, "\n"))
	}
	// One trace, one tree: every span but the client's has its parent in it.
	for _, sp := range tr.orphans(root.SpanContext().SpanID()) {
		t.Errorf("span %q (%s) has a parent outside the trace", sp.Name, serviceOf(sp))
	}
}

// orphans lists the spans, other than root, whose parent is not in the tree.
func (tr traceTree) orphans(root trace.SpanID) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, sp := range tr.spans {
		if sp.SpanContext.SpanID() == root {
			continue
		}
		if _, ok := tr.byID[sp.Parent.SpanID()]; !ok {
			out = append(out, sp)
		}
	}
	return out
}

// traceTree is the spans of one trace, by id.
type traceTree struct {
	spans []tracetest.SpanStub // by start time
	byID  map[trace.SpanID]tracetest.SpanStub
}

func newTraceTree(all tracetest.SpanStubs, id trace.TraceID) traceTree {
	tr := traceTree{byID: map[trace.SpanID]tracetest.SpanStub{}}
	for _, sp := range all {
		if sp.SpanContext.TraceID() == id {
			tr.spans = append(tr.spans, sp)
			tr.byID[sp.SpanContext.SpanID()] = sp
		}
	}
	slices.SortStableFunc(tr.spans, func(a, b tracetest.SpanStub) int { return a.StartTime.Compare(b.StartTime) })
	return tr
}

// find returns the first span (by start time) that matches.
func (tr traceTree) find(match func(tracetest.SpanStub) bool) *tracetest.SpanStub {
	for i := range tr.spans {
		if match(tr.spans[i]) {
			return &tr.spans[i]
		}
	}
	return nil
}

// under reports whether anc is a proper ancestor of sp.
func (tr traceTree) under(sp, anc tracetest.SpanStub) bool {
	for range len(tr.spans) {
		p, ok := tr.byID[sp.Parent.SpanID()]
		if !ok {
			return false
		}
		if p.SpanContext.SpanID() == anc.SpanContext.SpanID() {
			return true
		}
		sp = p
	}
	return false
}

// String draws the tree: name, kind, service, and a database span's statement.
func (tr traceTree) String() string {
	children := map[trace.SpanID][]tracetest.SpanStub{}
	var roots []tracetest.SpanStub
	for _, sp := range tr.spans {
		if _, ok := tr.byID[sp.Parent.SpanID()]; ok {
			children[sp.Parent.SpanID()] = append(children[sp.Parent.SpanID()], sp)
		} else {
			roots = append(roots, sp)
		}
	}
	var b strings.Builder
	var draw func(sp tracetest.SpanStub, depth int)
	draw = func(sp tracetest.SpanStub, depth int) {
		fmt.Fprintf(&b, "%s%s [%s] service=%s span=%s", strings.Repeat("  ", depth), sp.Name, sp.SpanKind, serviceOf(sp), sp.SpanContext.SpanID())
		if q, ok := dbStatement(sp); ok {
			fmt.Fprintf(&b, " db: %.70s", strings.Join(strings.Fields(q), " "))
		}
		b.WriteByte('\n')
		for _, c := range children[sp.SpanContext.SpanID()] {
			draw(c, depth+1)
		}
	}
	for _, r := range roots {
		draw(r, 0)
	}
	return b.String()
}

func serviceOf(sp tracetest.SpanStub) string {
	if sp.Resource != nil {
		if v, ok := sp.Resource.Set().Value(semconv.ServiceNameKey); ok {
			return v.AsString()
		}
	}
	return "?"
}

// dbStatement returns the statement of a PostgreSQL span.
func dbStatement(sp tracetest.SpanStub) (string, bool) {
	var db bool
	var q string
	for _, a := range sp.Attributes {
		switch a.Key {
		case "db.system":
			db = a.Value.AsString() == "postgresql"
		case "db.query.text":
			q = a.Value.AsString()
		}
	}
	return q, db
}
