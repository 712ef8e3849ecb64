package notify_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/events"
	"github.com/berthhq/berth/internal/notify"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/reservation"
)

// A hotel stay is pushed like an appointment: the device token the guest
// gave at hold time travels in the stay's events, and its confirmation,
// check-in and walk each go out once through FCM (the stand-in), redelivered
// or not; a stay without a token sends no push.
func TestStayNotificationsArePushed(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := dbtest.New(t, postgres.Options{})
	push := newFCMStandIn(t, "berth-test")
	fcm, err := notify.NewFCMSender(ctx, notify.FCMConfig{ProjectID: "berth-test", CredentialsJSON: push.credentialsJSON(t), BaseURL: push.URL})
	if err != nil {
		t.Fatal(err)
	}
	n := notify.New(postgres.NewNotifications(db), map[string]notify.Sender{notify.ChannelPush: fcm},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	n.Retry = func(int) time.Duration { return 0 }

	in := reservation.DateOf(time.Now().UTC().AddDate(0, 0, 1))
	stay := reservation.Reservation{ID: "7d1c2b3a-4e5f-4a6b-8c7d-9e0f1a2b3c4d", HotelID: "0b6f2c44-5a1e-4f0e-8b7a-2c3d4e5f6a7b",
		RoomTypeID: "3e2d1c0b-9a8f-4e7d-8c6b-5a4f3e2d1c0b", GuestID: "ann", CheckIn: in, CheckOut: in.AddDays(2), Quantity: 1,
		Status: reservation.StatusConfirmed, ContactPushToken: "fcm:stay-token_1", Version: 2, UpdatedAt: time.Now().UTC()}
	silent := stay
	silent.ID, silent.GuestID, silent.ContactPushToken = "8e2d3c4b-5f6a-4b7c-9d8e-0f1a2b3c4d5e", "bob", ""
	envelope := func(id, typ string, r any) events.Envelope {
		data, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		return events.Envelope{SpecVersion: "1.0", ID: id, Source: "test", Type: typ, Kind: "hotel", PartitionID: stay.HotelID,
			Time: time.Now().UTC(), Data: data}
	}
	checkedIn, walked := stay, stay
	checkedIn.Status, checkedIn.Version = reservation.StatusCheckedIn, 3
	walked.Status, walked.Version = reservation.StatusWalked, 3
	evs := []events.Envelope{
		envelope("9f0e8d7c-6b5a-4c3d-8e2f-1a0b9c8d7e61", reservation.EventConfirmed, stay),
		envelope("9f0e8d7c-6b5a-4c3d-8e2f-1a0b9c8d7e62", reservation.EventCheckedIn, checkedIn),
		// The walked event carries the stay beside the compensation, as the
		// store writes it.
		envelope("9f0e8d7c-6b5a-4c3d-8e2f-1a0b9c8d7e63", reservation.EventWalked, map[string]any{"reservation": walked,
			"compensation": reservation.Compensation{AmountCents: 24000, Currency: "EUR", PayeeHotel: "sister", Reason: "walk"}}),
		envelope("9f0e8d7c-6b5a-4c3d-8e2f-1a0b9c8d7e64", reservation.EventConfirmed, silent),
	}
	for range 2 {
		for _, e := range evs {
			if err := n.Apply(ctx, e); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := n.Dispatch(ctx, 100); err != nil {
			t.Fatal(err)
		}
	}
	got := push.messages()
	if len(got) != 3 {
		t.Fatalf("FCM received %d messages, want 3 (confirmed, checked in, walked): %v", len(got), got)
	}
	var titles []string
	for _, m := range got {
		b, _ := json.Marshal(m)
		var msg struct {
			Token        string
			Notification struct{ Title, Body string }
		}
		if err := json.Unmarshal(b, &msg); err != nil {
			t.Fatal(err)
		}
		if msg.Token != stay.ContactPushToken || !strings.Contains(msg.Notification.Body, "Hotel stay") {
			t.Fatalf("push sent: %s", b)
		}
		titles = append(titles, msg.Notification.Title)
	}
	if strings.Join(titles, "|") != "Booking confirmed|Welcome: you are checked in|Your stay moved to a sister hotel" {
		t.Fatalf("pushes: %q", titles)
	}
}
