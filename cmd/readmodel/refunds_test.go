package main

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/bookingtest"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/natsbus"
	"github.com/nats-io/nats.go"
)

// A late confirm whose rooms were sold meanwhile requests a refund; the
// refunds consumer refunds it once, even when the event comes again.
func TestRefundRequestedRefundsOnce(t *testing.T) {
	s := newStackTTL(t, time.Second)
	s.startRelay("us-east", nil)
	s.startReadModel(nil)
	env := s.regions["us-east"]
	h := env.SeedHotel("", 1, 0, bookingTestFrom, bookingTestTo)
	late := hold(t, env, h, "guest-late", 4)
	time.Sleep(1100 * time.Millisecond)
	if n, err := env.Store.ExpireHolds(context.Background(), 10); err != nil || n != 1 {
		t.Fatalf("expire: %d %v", n, err)
	}
	hold(t, env, h, "guest-fast", 4)
	r := env.Do(bookingtest.Request{Method: "POST", Path: "/v1/hotels/" + h.ID + "/reservations/" + late.id + "/confirm",
		Token: env.Token(late.guestID, berth.RoleGuest), IdemKey: bookingtest.NewKey(), Body: map[string]any{"payment_ref": late.paymentRef}})
	if r.Status != http.StatusConflict || r.Code() != "hold_expired" {
		t.Fatalf("late confirm: %d %s", r.Status, r.Body)
	}
	refunds := func() (n int, amount int64) {
		_ = dbtest.SQL(s.db).QueryRow(context.Background(), `SELECT count(*), COALESCE(sum(amount_cents), 0) FROM payment_refunds WHERE reservation_id = $1`, late.id).Scan(&n, &amount)
		return n, amount
	}
	eventually(t, 20*time.Second, "the refund", func() bool { n, _ := refunds(); return n == 1 })
	// The same event again (new message id, so the broker keeps it).
	nc, err := nats.Connect(s.nats.URL)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, _ := natsbus.NewJetStream(nc, 5*time.Second)
	stream, err := natsbus.EnsureStream(context.Background(), js)
	if err != nil {
		t.Fatal(err)
	}
	m, err := stream.GetLastMsgForSubject(context.Background(), "berth.hotel."+h.ID+".refund_requested")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := js.Publish(context.Background(), m.Subject, m.Data); err != nil {
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "refunds consumer drained", func() bool {
		p, err := natsbus.Pending(context.Background(), js, "refunds")
		return err == nil && p == 0
	})
	if n, amount := refunds(); n != 1 || amount != 20000 {
		t.Fatalf("%d refund(s) of %d cents, want 1 of 20000", n, amount)
	}
}
