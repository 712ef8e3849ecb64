package routerd

import (
	"cmp"
	"log/slog"
	"net/http"
	"os"
	"time"

	"github.com/berthhq/berth/internal/auth"
	"github.com/berthhq/berth/internal/clientip"
	"github.com/berthhq/berth/internal/config"
	"github.com/berthhq/berth/internal/ratelimit"
	"github.com/berthhq/berth/internal/waitingroom"
)

// ReadsConfig is the router's flash-crowd protection: rate limits and the
// clinics' waiting rooms, both kept in the region's Redis.
type ReadsConfig struct {
	RedisURL    string                        // BERTH_REDIS_URL
	Rules       ratelimit.Rules               // BERTH_RATE_LIMITS
	Windows     map[string]waitingroom.Window // BERTH_WAITING_ROOMS
	Keys        *waitingroom.Keyring          // BERTH_WAITING_ROOM_KEYS
	TokenSecret string                        // BERTH_TOKEN_SECRET: tells clients apart by verified subject
	TokenMaxTTL time.Duration                 // BERTH_TOKEN_MAX_TTL
	// Proxies are the trusted proxies in front of the router (BERTH_TRUSTED_PROXIES):
	// the client address that keys budgets and tickets is read through them.
	Proxies clientip.Proxies
	// LimitTimeout bounds how long a rate-limit decision waits for Redis
	// before the limiter fails open (BERTH_RATE_LIMIT_TIMEOUT, 50ms).
	LimitTimeout time.Duration
}

func loadReads(errs *config.Errors) ReadsConfig {
	var (
		c   ReadsConfig
		err error
	)
	c.RedisURL = config.Env("BERTH_REDIS_URL", "")
	c.TokenSecret = config.Env("BERTH_TOKEN_SECRET", "")
	c.TokenMaxTTL, err = auth.ParseMaxLifetime(config.Env(auth.MaxLifetimeEnvVar, ""))
	errs.Check(err)
	c.Rules, err = ratelimit.ParseRules(ratelimit.EnvVar, os.Getenv(ratelimit.EnvVar))
	errs.Check(err)
	c.LimitTimeout, err = config.Duration("BERTH_RATE_LIMIT_TIMEOUT", defaultLimitTimeout)
	errs.Check(err)
	if err == nil && c.LimitTimeout == 0 {
		errs.Add("BERTH_RATE_LIMIT_TIMEOUT: must be more than 0")
	}
	c.Windows, c.Keys, err = waitingroom.Parse(os.Getenv(waitingroom.WindowsEnvVar), os.Getenv(waitingroom.KeysEnvVar))
	errs.Check(err)
	if (len(c.Rules) > 0 || len(c.Windows) > 0) && c.RedisURL == "" {
		errs.Add("BERTH_REDIS_URL: required when BERTH_RATE_LIMITS or BERTH_WAITING_ROOMS is set")
	}
	if c.TokenSecret != "" && len(c.TokenSecret) < auth.MinSecretLen {
		errs.Add("BERTH_TOKEN_SECRET: at least %d bytes", auth.MinSecretLen)
	}
	if len(c.Windows) > 0 && c.TokenSecret == "" {
		// An access token admits only the guest who joined; without
		// verified tokens no ticket names a guest, and nobody could book.
		errs.Add("BERTH_TOKEN_SECRET: required when BERTH_WAITING_ROOMS is set (access tokens are bound to the guest who joined)")
	}
	c.Proxies, err = clientip.Parse(clientip.EnvVar, config.Env(clientip.EnvVar, ""))
	errs.Check(err)
	return c
}

// defaultLimitTimeout is how long a rate-limit decision waits for Redis:
// the limiter protects the booking services and is no correctness fence, so
// a slow Redis must cost a request little (docs/SECURITY.md).
const defaultLimitTimeout = 50 * time.Millisecond

// newLimiter returns the region's rate limiter, or nil without rate limits;
// close releases its Redis client.
func newLimiter(cfg ReadsConfig, region string, log *slog.Logger) (lim *ratelimit.Limiter, close func(), err error) {
	if len(cfg.Rules) == 0 {
		return nil, func() {}, nil
	}
	timeout := cmp.Or(cfg.LimitTimeout, defaultLimitTimeout)
	rdb, err := ratelimit.NewClient(cfg.RedisURL, timeout)
	if err != nil {
		return nil, nil, err
	}
	return ratelimit.New(rdb, ratelimit.Options{Prefix: "berth:" + region + ":rl", Timeout: timeout, Logger: log}), func() { _ = rdb.Close() }, nil
}

// withReads puts the rate limits (lim, from newLimiter) in front of next,
// and the waiting room between them: ticket requests are limited per client
// like any other, and never reach a booking service. close releases the
// waiting room's Redis client.
func withReads(cfg ReadsConfig, lim *ratelimit.Limiter, log *slog.Logger, next http.Handler) (h http.Handler, close func(), err error) {
	h, close = next, func() {}
	if len(cfg.Rules) == 0 && len(cfg.Windows) == 0 {
		return h, close, nil
	}
	ident := ratelimit.Identifier{Proxies: cfg.Proxies}
	if cfg.TokenSecret != "" {
		if ident.Tokens, err = auth.New(cfg.TokenSecret, auth.WithMaxLifetime(cfg.TokenMaxTTL)); err != nil {
			return nil, nil, err
		}
	}
	if len(cfg.Windows) > 0 {
		// Redis calls of the waiting room may take a little longer than the
		// limiter's: refusing a ticket is worse than a slow one.
		rdb, err := ratelimit.NewClient(cfg.RedisURL, 500*time.Millisecond)
		if err != nil {
			return nil, nil, err
		}
		close = func() { _ = rdb.Close() }
		room := waitingroom.NewRoom(cfg.Windows, cfg.Keys, rdb, waitingroom.Options{Logger: log})
		h = room.Mount(ident.Identify, h)
	}
	if lim != nil {
		h = (&ratelimit.Middleware{Limiter: lim, Rules: cfg.Rules, Identify: ident.Identify, Logger: log}).Wrap(h)
	}
	log.Info("flash-crowd protection", "rate_limits", cfg.Rules.String(), "waiting_rooms", len(cfg.Windows),
		"trusted_proxies", cfg.Proxies.String())
	return h, close, nil
}
