package notify_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/berthhq/berth/internal/appointment"
	"github.com/berthhq/berth/internal/dbtest"
	"github.com/berthhq/berth/internal/events"
	"github.com/berthhq/berth/internal/notify"
	"github.com/berthhq/berth/internal/postgres"
)

func itoa(n int) string { return strconv.Itoa(n) }

func errorf(format string, args ...any) error { return fmt.Errorf(format, args...) }

const (
	testAccount = "AC0123456789abcdef0123456789abcdef"
	testToken   = "0123456789abcdef0123456789abcdef"
)

func TestTwilioSender(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	msg := notify.Message{Key: "e1", Channel: notify.ChannelSMS, Template: "confirmation", To: "+4915112345678",
		Subject: "Booking confirmed", Body: "Your appointment is confirmed."}

	t.Run("auth token and From number", func(t *testing.T) {
		t.Parallel()
		api := newTwilioStandIn(t, testAccount, testAccount, testToken)
		s, err := notify.NewTwilioSender(notify.TwilioConfig{AccountSID: testAccount, AuthToken: testToken, From: "+15005550006", BaseURL: api.URL})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(ctx, msg); err != nil {
			t.Fatal(err)
		}
		got := api.messages()
		if len(got) != 1 || got[0]["To"] != msg.To || got[0]["From"] != "+15005550006" || got[0]["Body"] != msg.Subject+"\n"+msg.Body {
			t.Fatalf("Twilio received %v", got)
		}
	})
	t.Run("API key and messaging service", func(t *testing.T) {
		t.Parallel()
		const keySID, keySecret = "SK0123456789abcdef0123456789abcdef", "s3cr3tS3cr3ts3cr3tS3cr3t"
		api := newTwilioStandIn(t, testAccount, keySID, keySecret)
		s, err := notify.NewTwilioSender(notify.TwilioConfig{AccountSID: testAccount, APIKeySID: keySID, APIKeySecret: keySecret,
			MessagingServiceSID: "MG0123456789abcdef0123456789abcdef", BaseURL: api.URL + "/"})
		if err != nil {
			t.Fatal(err)
		}
		if err := s.Send(ctx, msg); err != nil {
			t.Fatal(err)
		}
		if got := api.messages(); len(got) != 1 || got[0]["MessagingServiceSid"] != "MG0123456789abcdef0123456789abcdef" || got[0]["From"] != "" {
			t.Fatalf("Twilio received %v", got)
		}
	})
	t.Run("refusals are errors that say why", func(t *testing.T) {
		t.Parallel()
		api := newTwilioStandIn(t, testAccount, testAccount, testToken)
		api.reject = 21211
		s, _ := notify.NewTwilioSender(notify.TwilioConfig{AccountSID: testAccount, AuthToken: testToken, From: "+15005550006", BaseURL: api.URL})
		if err := s.Send(ctx, msg); err == nil || !strings.Contains(err.Error(), "21211") {
			t.Fatalf("a refused number: %v", err)
		}
		wrong, _ := notify.NewTwilioSender(notify.TwilioConfig{AccountSID: testAccount, AuthToken: "wrongtoken", From: "+15005550006", BaseURL: api.URL})
		if err := wrong.Send(ctx, msg); err == nil || !strings.Contains(err.Error(), "401") {
			t.Fatalf("a wrong token: %v", err)
		}
		if err := s.Send(ctx, notify.Message{Channel: notify.ChannelPush, To: "x"}); err == nil {
			t.Fatal("an SMS sender sent a push message")
		}
	})
	t.Run("a cancelled send ends", func(t *testing.T) {
		t.Parallel()
		api := newTwilioStandIn(t, testAccount, testAccount, testToken)
		s, _ := notify.NewTwilioSender(notify.TwilioConfig{AccountSID: testAccount, AuthToken: testToken, From: "+15005550006", BaseURL: api.URL})
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if err := s.Send(cctx, msg); err == nil || len(api.messages()) != 0 {
			t.Fatalf("a cancelled send: %v, %d sent", err, len(api.messages()))
		}
	})
	for name, cfg := range map[string]notify.TwilioConfig{
		"no account":        {AuthToken: testToken, From: "+1"},
		"no secret":         {AccountSID: testAccount, From: "+1"},
		"no sender":         {AccountSID: testAccount, AuthToken: testToken},
		"two senders":       {AccountSID: testAccount, AuthToken: testToken, From: "+1", MessagingServiceSID: "MG1"},
		"a relative base":   {AccountSID: testAccount, AuthToken: testToken, From: "+1", BaseURL: "localhost:1"},
		"half an API key":   {AccountSID: testAccount, APIKeySID: "SK1", From: "+1"},
		"account not an AC": {AccountSID: "SK1", AuthToken: testToken, From: "+1"},
	} {
		if _, err := notify.NewTwilioSender(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func TestFCMSender(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	api := newFCMStandIn(t, "berth-test")
	s, err := notify.NewFCMSender(ctx, notify.FCMConfig{ProjectID: "berth-test", CredentialsJSON: api.credentialsJSON(t), BaseURL: api.URL})
	if err != nil {
		t.Fatal(err)
	}
	msg := notify.Message{Key: "e1", Channel: notify.ChannelPush, Template: "reminder", To: "dev-token-1",
		Subject: "Reminder", Body: "Your appointment starts soon."}
	for range 2 {
		if err := s.Send(ctx, msg); err != nil {
			t.Fatal(err)
		}
	}
	got := api.messages()
	if len(got) != 2 {
		t.Fatalf("FCM received %d messages", len(got))
	}
	b, _ := json.Marshal(got[0])
	var m struct {
		Token        string
		Notification struct{ Title, Body string }
		Data         map[string]string
	}
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.Token != msg.To || m.Notification.Title != msg.Subject || m.Notification.Body != msg.Body ||
		m.Data["berth_key"] != "e1" || m.Data["berth_template"] != "reminder" {
		t.Fatalf("FCM received %s", b)
	}
	api.mu.Lock()
	tokens := api.tokens
	api.unregistered["gone-token"] = true
	api.mu.Unlock()
	if tokens != 1 {
		t.Fatalf("%d access tokens fetched for two sends, want 1 (cached)", tokens)
	}
	if err := s.Send(ctx, notify.Message{Channel: notify.ChannelPush, To: "gone-token", Subject: "s", Body: "b"}); err == nil ||
		!strings.Contains(err.Error(), "no longer registered") {
		t.Fatalf("an unregistered token: %v", err)
	}
	if err := s.Send(ctx, notify.Message{Channel: notify.ChannelSMS, To: "+1"}); err == nil {
		t.Fatal("a push sender sent an SMS")
	}
	if _, err := notify.NewFCMSender(ctx, notify.FCMConfig{CredentialsJSON: api.credentialsJSON(t)}); err == nil {
		t.Fatal("no project id accepted")
	}
}

// At most once per (event, channel), as for e-mail and webhooks: an
// appointment's event delivered three times, with a phone and a device
// token among its contacts, queues one SMS and one push; the dispatcher
// sends each once through the providers' stand-ins, and a failed send is
// retried until it goes out, never sent twice.
func TestChannelsAtMostOncePerEvent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, _ := dbtest.New(t, postgres.Options{})
	sms := newTwilioStandIn(t, testAccount, testAccount, testToken)
	push := newFCMStandIn(t, "berth-test")
	twilio, err := notify.NewTwilioSender(notify.TwilioConfig{AccountSID: testAccount, AuthToken: testToken, From: "+15005550006", BaseURL: sms.URL})
	if err != nil {
		t.Fatal(err)
	}
	fcm, err := notify.NewFCMSender(ctx, notify.FCMConfig{ProjectID: "berth-test", CredentialsJSON: push.credentialsJSON(t), BaseURL: push.URL})
	if err != nil {
		t.Fatal(err)
	}
	n := notify.New(postgres.NewNotifications(db), map[string]notify.Sender{notify.ChannelSMS: twilio, notify.ChannelPush: fcm},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	n.Retry = func(int) time.Duration { return 0 }

	start := time.Now().Add(48 * time.Hour).UTC().Truncate(time.Minute)
	a := appointment.Appointment{ID: "5a3c6c8e-1d4f-4c55-9a3e-7f1f2b8c9d01", ClinicID: "0b6f2c44-5a1e-4f0e-8b7a-2c3d4e5f6a7b",
		GuestID: "pat", Status: appointment.StatusConfirmed, StartsAt: start, EndsAt: start.Add(30 * time.Minute),
		ContactPhone: "+4915112345678", ContactPushToken: "dev-token-1", Version: 2, UpdatedAt: time.Now().UTC()}
	data, err := json.Marshal(a)
	if err != nil {
		t.Fatal(err)
	}
	e := events.Envelope{SpecVersion: "1.0", ID: "9f0e8d7c-6b5a-4c3d-8e2f-1a0b9c8d7e6f", Source: "test", Type: appointment.EventConfirmed,
		Kind: "clinic", PartitionID: a.ClinicID, AggregateVersion: 2, Time: time.Now().UTC(), Data: data}

	sms.mu.Lock()
	sms.reject = 21611 // the first attempt fails: the queue retries it
	sms.mu.Unlock()
	for range 3 {
		if err := n.Apply(ctx, e); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.Dispatch(ctx, 100); err != nil {
		t.Fatal(err)
	}
	sms.mu.Lock()
	sms.reject = 0
	sms.mu.Unlock()
	for range 3 { // redeliveries after the first dispatch change nothing either
		if err := n.Apply(ctx, e); err != nil {
			t.Fatal(err)
		}
		if _, err := n.Dispatch(ctx, 100); err != nil {
			t.Fatal(err)
		}
	}
	if got := sms.messages(); len(got) != 1 || got[0]["To"] != a.ContactPhone || !strings.HasPrefix(got[0]["Body"], "Booking confirmed\n") {
		t.Fatalf("SMS sent: %v", got)
	}
	if got := push.messages(); len(got) != 1 || got[0]["token"] != a.ContactPushToken {
		t.Fatalf("push sent: %v", got)
	}
	var rows, sent int
	if err := dbtest.SQL(db).QueryRow(ctx, `SELECT count(*), count(*) FILTER (WHERE status = 'sent') FROM notify_messages WHERE message_key = $1`,
		e.ID).Scan(&rows, &sent); err != nil || rows != 2 || sent != 2 {
		t.Fatalf("notify_messages: %d rows, %d sent (%v), want 2 and 2", rows, sent, err)
	}
}
