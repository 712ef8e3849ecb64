package main

import (
	"context"
	"strings"
	"testing"

	"github.com/berthhq/berth/internal/notify"
)

// SMS goes through Twilio and push through FCM when their settings are
// there, whatever the sender mode; half a Twilio setting is refused at
// start, not at the first message.
func TestNotifyChannelsFromEnvironment(t *testing.T) {
	t.Setenv("BERTH_NOTIFY_SENDER", "dev")
	t.Setenv("BERTH_TWILIO_ACCOUNT_SID", "AC0123456789abcdef0123456789abcdef")
	if _, err := loadNotifyConfig(); err == nil || !strings.Contains(err.Error(), "BERTH_TWILIO_") {
		t.Fatalf("a Twilio account without a secret or sender: %v", err)
	}
	t.Setenv("BERTH_TWILIO_AUTH_TOKEN", "0123456789abcdef0123456789abcdef")
	t.Setenv("BERTH_TWILIO_FROM", "+15005550006")
	t.Setenv("BERTH_FCM_PROJECT_ID", "berth-test")
	t.Setenv("BERTH_FCM_CREDENTIALS_JSON", `{"type":"service_account","project_id":"berth-test","client_email":"a@b","private_key":"x","token_uri":"http://127.0.0.1:1/token"}`)
	c, err := loadNotifyConfig()
	if err != nil {
		t.Fatal(err)
	}
	senders, err := c.senders(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := senders[notify.ChannelSMS].(*notify.TwilioSender); !ok {
		t.Errorf("SMS sender is %T", senders[notify.ChannelSMS])
	}
	if _, ok := senders[notify.ChannelPush].(*notify.FCMSender); !ok {
		t.Errorf("push sender is %T", senders[notify.ChannelPush])
	}
	if _, ok := senders[notify.ChannelEmail].(notify.FileSender); !ok {
		t.Errorf("e-mail sender is %T", senders[notify.ChannelEmail])
	}
	t.Setenv("BERTH_FCM_PROJECT_ID", "")
	if _, err := loadNotifyConfig(); err == nil || !strings.Contains(err.Error(), "BERTH_FCM_PROJECT_ID") {
		t.Fatalf("FCM credentials without a project: %v", err)
	}
}
