package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/smtp"
	"time"

	"github.com/berthhq/berth/internal/config"
	"github.com/berthhq/berth/internal/events"
	"github.com/berthhq/berth/internal/natsbus"
	"github.com/berthhq/berth/internal/notify"
	"github.com/berthhq/berth/internal/payments"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/nats-io/nats.go/jetstream"
)

// notifyConfig configures notifications and refunds.
type notifyConfig struct {
	Sender        string // dev | smtp | webhook | none
	Dir           string // dev sender's directory
	SMTPAddr      string
	SMTPFrom      string
	SMTPUser      string
	SMTPPassword  string
	WebhookURL    string
	WebhookSecret string
	// Twilio sends SMS when its account is set (BERTH_TWILIO_*), in place
	// of the webhook; FCM sends push when its project is set (BERTH_FCM_*).
	Twilio           notify.TwilioConfig
	FCM              notify.FCMConfig
	ReminderInterval time.Duration
	DispatchInterval time.Duration
	// Wrap, when set, wraps each sender (tests count sends through it).
	Wrap func(notify.Sender) notify.Sender
}

func loadNotifyConfig() (notifyConfig, error) {
	var (
		c    notifyConfig
		errs config.Errors
		err  error
	)
	c.Sender = config.Env("BERTH_NOTIFY_SENDER", "dev")
	c.Dir = config.Env("BERTH_NOTIFY_DIR", ".local/outbox-mail")
	c.SMTPAddr = config.Env("BERTH_SMTP_ADDR", "")
	c.SMTPFrom = config.Env("BERTH_SMTP_FROM", "bookings@berth.local")
	c.SMTPUser = config.Env("BERTH_SMTP_USERNAME", "")
	c.SMTPPassword = config.Env("BERTH_SMTP_PASSWORD", "")
	c.WebhookURL = config.Env("BERTH_NOTIFY_WEBHOOK_URL", "")
	c.WebhookSecret = config.Env("BERTH_NOTIFY_WEBHOOK_SECRET", "")
	c.Twilio = notify.TwilioConfig{
		AccountSID: config.Env("BERTH_TWILIO_ACCOUNT_SID", ""), AuthToken: config.Env("BERTH_TWILIO_AUTH_TOKEN", ""),
		APIKeySID: config.Env("BERTH_TWILIO_API_KEY_SID", ""), APIKeySecret: config.Env("BERTH_TWILIO_API_KEY_SECRET", ""),
		From: config.Env("BERTH_TWILIO_FROM", ""), MessagingServiceSID: config.Env("BERTH_TWILIO_MESSAGING_SERVICE_SID", ""),
		BaseURL: config.Env("BERTH_TWILIO_BASE_URL", ""),
	}
	if c.Twilio.AccountSID != "" {
		if _, err := notify.NewTwilioSender(c.Twilio); err != nil {
			errs.Add("BERTH_TWILIO_*: %v", err)
		}
	}
	c.FCM = notify.FCMConfig{ProjectID: config.Env("BERTH_FCM_PROJECT_ID", ""), BaseURL: config.Env("BERTH_FCM_BASE_URL", "")}
	if creds := config.Env("BERTH_FCM_CREDENTIALS_JSON", ""); creds != "" {
		c.FCM.CredentialsJSON = []byte(creds)
		if c.FCM.ProjectID == "" {
			errs.Add("BERTH_FCM_PROJECT_ID: required with BERTH_FCM_CREDENTIALS_JSON")
		}
	}
	c.ReminderInterval, err = config.Duration("BERTH_REMINDER_INTERVAL", 5*time.Minute)
	errs.Check(err)
	c.DispatchInterval = time.Second
	switch c.Sender {
	case "dev", "none":
	case "smtp":
		if c.SMTPAddr == "" {
			errs.Add("BERTH_SMTP_ADDR: required with BERTH_NOTIFY_SENDER=smtp")
		}
	case "webhook":
	default:
		errs.Add("BERTH_NOTIFY_SENDER: want dev, smtp, webhook or none")
	}
	if (c.Sender == "webhook" || c.WebhookURL != "") && (c.WebhookURL == "" || len(c.WebhookSecret) < 16) {
		errs.Add("BERTH_NOTIFY_WEBHOOK_URL and BERTH_NOTIFY_WEBHOOK_SECRET (16+ bytes) are needed for the webhook sender")
	}
	return c, errs.Err()
}

// senders builds the sender of each channel: dev writes files for every
// channel; smtp sends e-mail (and SMS and push through the webhook when one
// is configured); webhook sends every channel to the provider's endpoint.
// Whatever the mode, SMS goes through Twilio when its account is set, and
// push through FCM when its project is.
func (c notifyConfig) senders(ctx context.Context) (map[string]notify.Sender, error) {
	out := map[string]notify.Sender{}
	var hook notify.Sender
	if c.WebhookURL != "" {
		hook = notify.WebhookSender{URL: c.WebhookURL, Secret: []byte(c.WebhookSecret)}
	}
	switch c.Sender {
	case "dev":
		out[notify.ChannelEmail] = notify.FileSender{Dir: c.Dir}
		out[notify.ChannelSMS] = notify.FileSender{Dir: c.Dir}
		out[notify.ChannelPush] = notify.FileSender{Dir: c.Dir}
	case "smtp":
		var auth smtp.Auth
		if c.SMTPUser != "" {
			host := c.SMTPAddr
			for i := len(host) - 1; i >= 0; i-- {
				if host[i] == ':' {
					host = host[:i]
					break
				}
			}
			auth = smtp.PlainAuth("", c.SMTPUser, c.SMTPPassword, host)
		}
		out[notify.ChannelEmail] = notify.SMTPSender{Addr: c.SMTPAddr, From: c.SMTPFrom, Auth: auth}
		if hook != nil {
			out[notify.ChannelSMS], out[notify.ChannelPush] = hook, hook
		}
	case "webhook":
		out[notify.ChannelEmail], out[notify.ChannelSMS], out[notify.ChannelPush] = hook, hook, hook
	}
	if c.Twilio.AccountSID != "" {
		s, err := notify.NewTwilioSender(c.Twilio)
		if err != nil {
			return nil, err
		}
		out[notify.ChannelSMS] = s
	}
	if c.FCM.ProjectID != "" {
		s, err := notify.NewFCMSender(ctx, c.FCM)
		if err != nil {
			return nil, err
		}
		out[notify.ChannelPush] = s
	}
	if c.Wrap != nil {
		for ch, s := range out {
			out[ch] = c.Wrap(s)
		}
	}
	return out, nil
}

// startNotifications starts, inside `readmodel serve`, the notification
// consumer, its dispatcher and reminder scan (unless the sender is none),
// and the refunds consumer with the configured payment provider.
func startNotifications(ctx context.Context, cfg serveConfig, db *postgres.DB, js jetstream.JetStream, log *slog.Logger,
	start func(string, func(context.Context) error)) error {
	provider, err := cfg.Payments.Refunds(db)
	if err != nil {
		return fmt.Errorf("payment provider: %w", err)
	}
	refunder := &payments.Refunder{Provider: provider, Log: log}
	start("refunds", func(ctx context.Context) error {
		return natsbus.Consume(ctx, js, natsbus.ConsumerConfig{Durable: payments.RefundsConsumer, MaxDeliver: cfg.MaxDeliver,
			Filters: []string{"berth.*.*.refund_requested"}, Workers: 2, Log: log, Transient: postgres.IsTransient},
			envelopeHandler(refunder.Apply))
	})
	if cfg.Notify.Sender == "none" {
		return nil
	}
	senders, err := cfg.Notify.senders(ctx)
	if err != nil {
		return fmt.Errorf("notifications: %w", err)
	}
	if len(senders) == 0 {
		return errors.New("notifications: no sender configured")
	}
	n := notify.New(postgres.NewNotifications(db), senders, log)
	start("notify", func(ctx context.Context) error {
		var filters []string
		for _, t := range notify.EventTypes() {
			filters = append(filters, "berth.*.*."+t)
		}
		return natsbus.Consume(ctx, js, natsbus.ConsumerConfig{Durable: notify.ConsumerName, MaxDeliver: cfg.MaxDeliver,
			Filters: filters, Workers: 4, Log: log, Transient: postgres.IsTransient}, envelopeHandler(n.Apply))
	})
	start("notify-dispatch", func(ctx context.Context) error {
		interval := cfg.Notify.DispatchInterval
		if interval <= 0 {
			interval = time.Second
		}
		postgres.Every(ctx, interval, func(ctx context.Context) {
			for ctx.Err() == nil {
				sent, err := n.Dispatch(ctx, 100)
				if err != nil && ctx.Err() == nil {
					log.Warn("dispatch notifications", "err", err)
				}
				if err != nil || sent < 100 {
					return
				}
			}
		})
		return nil
	})
	start("notify-reminders", func(ctx context.Context) error {
		postgres.Every(ctx, cfg.Notify.ReminderInterval, func(ctx context.Context) {
			if q, err := n.ScanReminders(ctx, 1000); err != nil && ctx.Err() == nil {
				log.Warn("scan reminders", "err", err)
			} else if q > 0 {
				log.Info("reminders queued", "count", q)
			}
		})
		return nil
	})
	return nil
}

// envelopeHandler adapts an event-applying func to a natsbus.Handler; a
// message that is not a valid event fails (and ends in the dead letters).
func envelopeHandler(apply func(context.Context, events.Envelope) error) natsbus.Handler {
	return func(ctx context.Context, m natsbus.Message) error {
		if m.DecodeErr != nil {
			return m.DecodeErr
		}
		return apply(ctx, m.Event)
	}
}
