package notify

import (
	"context"
	"errors"
	"fmt"
	"strings"

	firebase "firebase.google.com/go/v4"
	"firebase.google.com/go/v4/messaging"
	"google.golang.org/api/option"
)

// FCMConfig configures the push channel through Firebase Cloud Messaging's
// HTTP v1 API. Credentials come from the environment only (cmd/readmodel):
// a service account's JSON, or Google's Application Default Credentials
// (GOOGLE_APPLICATION_CREDENTIALS, or the workload's identity) without it.
type FCMConfig struct {
	// ProjectID is the Firebase project messages are sent through.
	ProjectID string
	// CredentialsJSON is a service account key (JSON); empty: ADC.
	CredentialsJSON []byte
	// BaseURL replaces https://fcm.googleapis.com (a local stand-in in
	// tests); the API's /v1 path goes under it.
	BaseURL string
}

// FCMSender sends push notifications with Firebase's own Go client
// (firebase.google.com/go/v4/messaging): POST
// /v1/projects/{project}/messages:send with an OAuth 2 access token the
// client gets and refreshes from the service account. FCM offers no
// idempotency key, so, as for SMS, the queue's claim is the dedup.
type FCMSender struct {
	client *messaging.Client
}

// NewFCMSender checks cfg and returns its sender; it reads no credential
// over the network until the first send.
func NewFCMSender(ctx context.Context, cfg FCMConfig) (*FCMSender, error) {
	if cfg.ProjectID == "" {
		return nil, errors.New("fcm: want a project id")
	}
	var opts []option.ClientOption
	if len(cfg.CredentialsJSON) > 0 {
		opts = append(opts, option.WithCredentialsJSON(cfg.CredentialsJSON))
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithEndpoint(strings.TrimSuffix(cfg.BaseURL, "/")+"/v1"))
	}
	app, err := firebase.NewApp(ctx, &firebase.Config{ProjectID: cfg.ProjectID}, opts...)
	if err != nil {
		return nil, fmt.Errorf("fcm: %w", err)
	}
	client, err := app.Messaging(ctx)
	if err != nil {
		return nil, fmt.Errorf("fcm: %w", err)
	}
	return &FCMSender{client: client}, nil
}

// Send sends one notification to the device token m.To. The message key
// and template travel as data, so the app can tell a reminder from a
// confirmation and ignore one it has shown.
func (s *FCMSender) Send(ctx context.Context, m Message) error {
	if m.Channel != ChannelPush {
		return fmt.Errorf("fcm sender: cannot send on channel %s", m.Channel)
	}
	_, err := s.client.Send(ctx, &messaging.Message{
		Token:        m.To,
		Notification: &messaging.Notification{Title: m.Subject, Body: m.Body},
		Data:         map[string]string{"berth_key": m.Key, "berth_template": m.Template},
	})
	if err != nil {
		// An unregistered token fails every retry alike; it is still
		// retried up to the notifier's limit (the queue has no "never"
		// outcome), and the error says why.
		if messaging.IsUnregistered(err) {
			return fmt.Errorf("fcm sender: the device token is no longer registered: %w", err)
		}
		return fmt.Errorf("fcm sender: %w", err)
	}
	return nil
}
