// Package notify sends guests their confirmation, cancellation, refund and
// reminder messages. Events become rows of notify_messages, one per
// (message key, channel), in the consumer's transaction; a dispatcher claims
// due rows (committing the claim before it sends, so each is sent at most
// once), sends them through a Sender per channel, and retries failures with
// backoff. Reminders come from a periodic scan of the read model's view.
package notify

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/smtp"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/berthhq/berth/internal/payments"
)

// The channels a message can go out on.
const (
	ChannelEmail = "email"
	ChannelSMS   = "sms"
	// ChannelPush goes to the device token of an appointment's app.
	ChannelPush = "push"
)

// Message is one message to one recipient on one channel.
type Message struct {
	Key      string // event id or reminder key; with Channel, the dedup key
	Channel  string
	Template string // confirmation | cancellation | refund | reminder | no_show | visit_completed
	To       string
	Subject  string
	Body     string
}

// Sender delivers a message. An error means it was not delivered (the
// dispatcher retries); implementations pass Key on as an idempotency key
// where the far side supports one.
type Sender interface {
	Send(ctx context.Context, m Message) error
}

// FileSender is the development sender: each message becomes a file in Dir
// (.local/outbox-mail/ in the local stack).
type FileSender struct{ Dir string }

var unsafeName = regexp.MustCompile(`[^A-Za-z0-9._-]+`)

// Send writes the message to <Dir>/<key>.<channel>.txt.
func (f FileSender) Send(_ context.Context, m Message) error {
	if err := os.MkdirAll(f.Dir, 0o755); err != nil {
		return fmt.Errorf("file sender: %w", err)
	}
	name := unsafeName.ReplaceAllString(m.Key, "_") + "." + m.Channel + ".txt"
	text := fmt.Sprintf("To: %s\nChannel: %s\nTemplate: %s\nSubject: %s\n\n%s\n", m.To, m.Channel, m.Template, m.Subject, m.Body)
	tmp := filepath.Join(f.Dir, "."+name+".tmp")
	if err := os.WriteFile(tmp, []byte(text), 0o644); err != nil {
		return fmt.Errorf("file sender: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(f.Dir, name)); err != nil {
		return fmt.Errorf("file sender: %w", err)
	}
	return nil
}

// SMTPSender sends e-mail through an SMTP server (STARTTLS when offered).
type SMTPSender struct {
	Addr string // host:port
	From string
	Auth smtp.Auth // nil for none
}

// Send sends one e-mail.
func (s SMTPSender) Send(_ context.Context, m Message) error {
	if m.Channel != ChannelEmail {
		return fmt.Errorf("smtp sender: cannot send on channel %s", m.Channel)
	}
	if strings.ContainsAny(m.To+m.Subject, "\r\n") {
		return errors.New("smtp sender: header injection refused")
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "From: %s\r\nTo: %s\r\nSubject: %s\r\nDate: %s\r\nMessage-ID: <%s@berth>\r\n", s.From, m.To, m.Subject,
		time.Now().UTC().Format(time.RFC1123Z), unsafeName.ReplaceAllString(m.Key, "_"))
	b.WriteString("MIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n")
	b.WriteString(strings.ReplaceAll(m.Body, "\n", "\r\n"))
	b.WriteString("\r\n")
	if err := smtp.SendMail(s.Addr, s.Auth, s.From, []string{m.To}, b.Bytes()); err != nil {
		return fmt.Errorf("smtp sender: %w", err)
	}
	return nil
}

// WebhookSender posts messages to an SMS/push provider's HTTP endpoint as
// JSON, signed like Berth's own webhooks (Berth-Signature: t=…,v1=HMAC),
// with Idempotency-Key "<key>:<channel>".
type WebhookSender struct {
	URL    string
	Secret []byte
	Client *http.Client
}

// Send posts one message; any non-2xx answer is a failure.
func (w WebhookSender) Send(ctx context.Context, m Message) error {
	body, err := json.Marshal(map[string]string{"key": m.Key, "channel": m.Channel, "template": m.Template,
		"to": m.To, "subject": m.Subject, "body": m.Body})
	if err != nil {
		return fmt.Errorf("webhook sender: %w", err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, w.URL, bytes.NewReader(body))
	if err != nil {
		return fmt.Errorf("webhook sender: %w", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", m.Key+":"+m.Channel)
	req.Header.Set("Berth-Signature", payments.Sign(w.Secret, time.Now(), body))
	c := w.Client
	if c == nil {
		c = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("webhook sender: %w", err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("webhook sender: %s answered %d", w.URL, resp.StatusCode)
	}
	return nil
}
