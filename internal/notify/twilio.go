package notify

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	twclient "github.com/twilio/twilio-go/client"
	twapi "github.com/twilio/twilio-go/rest/api/v2010"
)

// TwilioConfig configures the SMS channel through Twilio's Messages API.
// Every credential comes from the environment (cmd/readmodel); none has a
// default.
type TwilioConfig struct {
	// AccountSID is the account messages are sent for (AC…).
	AccountSID string
	// AuthToken authenticates as the account; or APIKeySID (SK…) with
	// APIKeySecret, which can be revoked on its own (Twilio's advice).
	AuthToken, APIKeySID, APIKeySecret string
	// From is the sending number (E.164), or MessagingServiceSID (MG…)
	// lets Twilio pick one of the service's senders.
	From, MessagingServiceSID string
	// BaseURL replaces https://api.twilio.com (a local stand-in in tests).
	BaseURL string
	// Timeout bounds one request (10s when zero).
	Timeout time.Duration
}

// maxSMSLength is the longest body the Messages API accepts.
const maxSMSLength = 1600

// TwilioSender sends SMS with Twilio's own Go client (twilio-go): a
// form-encoded POST /2010-04-01/Accounts/{AccountSid}/Messages.json with
// HTTP basic auth. Twilio offers no idempotency key on this endpoint, so
// the queue's claim (at most once per message and channel) is the only
// dedup: a request that timed out after Twilio accepted it is retried and
// may arrive twice — the same trade as SMTP.
type TwilioSender struct {
	cfg       TwilioConfig
	transport http.RoundTripper
}

// NewTwilioSender checks cfg and returns its sender.
func NewTwilioSender(cfg TwilioConfig) (*TwilioSender, error) {
	var problems []string
	if !strings.HasPrefix(cfg.AccountSID, "AC") {
		problems = append(problems, "an account SID (AC…)")
	}
	if cfg.AuthToken == "" && (cfg.APIKeySID == "" || cfg.APIKeySecret == "") {
		problems = append(problems, "an auth token, or an API key SID and secret")
	}
	if (cfg.From == "") == (cfg.MessagingServiceSID == "") {
		problems = append(problems, "either a From number or a messaging service SID")
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("twilio: want %s", strings.Join(problems, "; "))
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 10 * time.Second
	}
	s := &TwilioSender{cfg: cfg, transport: http.DefaultTransport}
	if cfg.BaseURL != "" {
		base, err := url.Parse(cfg.BaseURL)
		if err != nil || base.Scheme == "" || base.Host == "" {
			return nil, fmt.Errorf("twilio: base URL %q: want scheme://host[/path]", cfg.BaseURL)
		}
		s.transport = rebase{base: base, next: http.DefaultTransport}
	}
	return s, nil
}

// Send sends one SMS: the subject on the first line, then the body.
func (s *TwilioSender) Send(ctx context.Context, m Message) error {
	if m.Channel != ChannelSMS {
		return fmt.Errorf("twilio sender: cannot send on channel %s", m.Channel)
	}
	text := m.Subject + "\n" + m.Body
	if len(text) > maxSMSLength {
		text = truncate(text, maxSMSLength)
	}
	params := (&twapi.CreateMessageParams{}).SetTo(m.To).SetBody(text)
	if s.cfg.MessagingServiceSID != "" {
		params.SetMessagingServiceSid(s.cfg.MessagingServiceSID)
	} else {
		params.SetFrom(s.cfg.From)
	}
	msg, err := s.api(ctx).CreateMessage(params)
	if err != nil {
		var te *twclient.TwilioRestError
		if errors.As(err, &te) {
			return fmt.Errorf("twilio sender: %d (error %d): %s", te.Status, te.Code, te.Message)
		}
		return fmt.Errorf("twilio sender: %w", err)
	}
	if msg == nil || msg.Sid == nil || *msg.Sid == "" {
		return errors.New("twilio sender: the answer names no message")
	}
	return nil
}

// api returns the Messages API bound to ctx. twilio-go builds its requests
// without a context, so the one of this send travels in the transport: a
// client per send, which costs a few allocations against a network round
// trip, and lets a dispatcher's deadline or shutdown end the request.
func (s *TwilioSender) api(ctx context.Context) *twapi.ApiService {
	user, pass := s.cfg.AccountSID, s.cfg.AuthToken
	if s.cfg.APIKeySID != "" {
		user, pass = s.cfg.APIKeySID, s.cfg.APIKeySecret
	}
	c := &twclient.Client{
		Credentials: twclient.NewCredentials(user, pass),
		HTTPClient: &http.Client{
			Transport: withContext{ctx: ctx, next: s.transport},
			Timeout:   s.cfg.Timeout,
			// As twilio-go's default client: a redirect is an answer, not a hop.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}
	c.SetAccountSid(s.cfg.AccountSID)
	return twapi.NewApiServiceWithClient(c)
}

// withContext sends every request with ctx.
type withContext struct {
	ctx  context.Context
	next http.RoundTripper
}

func (w withContext) RoundTrip(r *http.Request) (*http.Response, error) {
	return w.next.RoundTrip(r.WithContext(w.ctx))
}

// rebase sends requests meant for a provider's host to base instead (a
// stand-in of the provider's API), keeping the path under base's.
type rebase struct {
	base *url.URL
	next http.RoundTripper
}

func (b rebase) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.URL.Scheme, r.URL.Host, r.Host = b.base.Scheme, b.base.Host, b.base.Host
	r.URL.Path = strings.TrimSuffix(b.base.Path, "/") + r.URL.Path
	r.URL.RawPath = ""
	return b.next.RoundTrip(r)
}
