package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/cli"
	"github.com/berthhq/berth/internal/config"
	"github.com/berthhq/berth/internal/httpapi"
	"github.com/berthhq/berth/internal/natsbus"
	"github.com/berthhq/berth/internal/postgres"
	"github.com/berthhq/berth/internal/rediscache"
	"github.com/berthhq/berth/internal/reservation"
	"github.com/berthhq/berth/internal/stripepay"
	"github.com/berthhq/berth/internal/walk"
)

// wireEvents wires the events part of the service: when BERTH_NATS_URL is
// set, the outbox relay of this region, the invalidator of the region's
// caches (run by the search index's consumer, or by the region's cache
// consumer without an index: wireSearch) and its waitlist consumers (freed
// rooms and slots to the first waiters); when BERTH_WEBHOOK_SECRET is set,
// the payment webhook.
//
// Environment: BERTH_NATS_URL, BERTH_OUTBOX_RETENTION (72h),
// BERTH_RELAY_BATCH (500), BERTH_RELAY_POLL (50ms), BERTH_WEBHOOK_SECRET,
// BERTH_WALK_RESUME_AFTER (5m: a relocation left walking that long has its
// request sent again; the job runs that often, at most every minute).
func wireEvents(ctx context.Context, w *wiring) error {
	var errs config.Errors
	retention, err := config.Duration("BERTH_OUTBOX_RETENTION", 72*time.Hour)
	errs.Check(err)
	batch, err := config.Int("BERTH_RELAY_BATCH", 500)
	errs.Check(err)
	poll, err := config.Duration("BERTH_RELAY_POLL", 50*time.Millisecond)
	errs.Check(err)
	resumeAfter, err := config.Duration("BERTH_WALK_RESUME_AFTER", 5*time.Minute)
	errs.Check(err)
	if resumeAfter < time.Second || resumeAfter > 24*time.Hour {
		errs.Add("BERTH_WALK_RESUME_AFTER: 1s to 24h")
	}
	if batch < 1 || batch > 10_000 {
		errs.Add("BERTH_RELAY_BATCH: 1 to 10000")
	}
	if retention < time.Hour {
		errs.Add("BERTH_OUTBOX_RETENTION: at least 1h (consumers and replays need the rows)")
	}
	if err := errs.Err(); err != nil {
		return cli.Usage(err)
	}
	if err := wirePayments(w); err != nil {
		return err
	}
	url := config.Env("BERTH_NATS_URL", "")
	if url == "" {
		w.log.Warn("BERTH_NATS_URL is not set: outbox events stay unsent and caches are not invalidated")
		return nil
	}
	nc, err := natsbus.Connect(url, "berth-booking-"+w.cfg.Region, w.log)
	if err != nil {
		return err
	}
	w.closers = append(w.closers, nc.Close)
	js, err := natsbus.NewJetStream(nc, 5*time.Second)
	if err != nil {
		return err
	}
	w.js = js
	relay := natsbus.NewRelay(js, w.store, natsbus.RelayConfig{
		Region: w.cfg.Region, Batch: batch, Poll: poll, Retention: retention, Log: w.log,
		MeterProvider:  w.tel.MeterProvider(),
		TracerProvider: w.tel.TracerProvider(),
	})
	// The region's cache (when configured) drops a partition's cached reads
	// on each of its events, whichever region wrote them.
	var inv natsbus.Invalidator = natsbus.NoopInvalidator{}
	if c, ok := w.api.Cache.(interface {
		Events() rediscache.EventInvalidator
	}); ok {
		inv = c.Events()
	}
	// The same events tell the sold-out cache that rooms may have come back
	// through another process's commit.
	inv = forgetSoldOut{Invalidator: inv, store: w.store}
	// The invalidations run in the search index's consumer (wireSearch), or
	// in the region's own consumer when there is no index.
	w.invalidator = inv
	// The relocation saga's steps homed in this region (internal/walk), and
	// the job that re-sends a walk whose answer has not come back.
	saga := walk.New(w.store, w.log)
	w.jobs = append(w.jobs, job{"resume-walks", min(resumeAfter, time.Minute), func(ctx context.Context) (int, error) {
		return w.store.ResumeWalks(ctx, resumeAfter, 100)
	}})
	w.runners = append(w.runners,
		relay.Run,
		func(ctx context.Context) {
			cfg := walk.ConsumerConfig(w.cfg.Region, postgres.IsTransient, w.log)
			if err := natsbus.Consume(ctx, js, cfg, saga.Handle); err != nil {
				w.log.Error("walk saga consumer stopped", "err", err)
			}
		},
		// Freed rooms go to the waitlists of this region's hotels.
		func(ctx context.Context) {
			if err := natsbus.OfferOnFree(ctx, js, w.cfg.Region, w.store, w.log); err != nil {
				w.log.Error("waitlist consumer stopped", "err", err)
			}
		},
	)
	if w.clinics != nil {
		// Freed slots go to the doctors' lines of this region's clinics.
		w.runners = append(w.runners, func(ctx context.Context) {
			if err := natsbus.OfferOnClinicFree(ctx, js, w.cfg.Region, w.clinics, w.log); err != nil {
				w.log.Error("clinic waitlist consumer stopped", "err", err)
			}
		})
	}
	return nil
}

// wirePayments wires the payment provider (internal/paymentprovider: it
// creates the intents of prepaid holds and verifies guests' payments), and
// serves the payment webhook when BERTH_WEBHOOK_SECRET is set. The webhook
// reaches the partition's home region (the router forwards it); elsewhere
// the store's fence answers 421. With the development provider and
// BERTH_DEV_PAYMENTS=on it also serves the development pay endpoint.
func wirePayments(w *wiring) error {
	provider, dev, err := w.cfg.Payments.New(w.db)
	if err != nil {
		return cli.Usage(fmt.Errorf("payment provider: %w", err))
	}
	w.api.PaymentProvider = provider
	w.log.Info("payment provider", "provider", w.cfg.Payments.Kind, "dev_payments", w.cfg.Payments.DevPayments)
	effects := postgres.PaymentEffects{Hotels: w.store}
	if clinics, ok := w.api.Clinics.(*postgres.ClinicStore); ok {
		effects.Clinics = clinics
	}
	if s := w.cfg.Payments.StripeWebhookSecret; s != "" {
		events, err := stripepay.NewEvents(s)
		if err != nil {
			return cli.Usage(fmt.Errorf("BERTH_STRIPE_WEBHOOK_SECRET: %w", err))
		}
		w.api.StripeWebhook = &httpapi.StripeWebhook{Events: events, Effects: effects}
	}
	secret := config.Env("BERTH_WEBHOOK_SECRET", "")
	if secret == "" {
		if w.cfg.Payments.DevPayments {
			return cli.Usage(errors.New("BERTH_DEV_PAYMENTS=on: needs BERTH_WEBHOOK_SECRET (the endpoint sends signed webhooks)"))
		}
		w.log.Warn("BERTH_WEBHOOK_SECRET is not set: POST /v1/payments/webhook is not served")
		return nil
	}
	if len(secret) < 16 {
		return cli.Usage(errors.New("BERTH_WEBHOOK_SECRET: at least 16 bytes"))
	}
	w.api.Payments = httpapi.NewPaymentWebhook(secret, effects)
	if w.cfg.Payments.DevPayments && dev != nil {
		w.log.Warn("development payments are on: POST /v1/dev/payments/{intent_id}/pay settles intents; never in production")
		w.api.DevPayments = &httpapi.DevPayments{Payer: dev, WebhookURL: w.cfg.Payments.DevWebhookURL,
			Client: &http.Client{Timeout: 10 * time.Second}}
	}
	return nil
}

// forgetSoldOut drops what the store's sold-out cache knows of a hotel on
// each of its events that may have freed rooms (anything but a hold or a
// confirmation), then invalidates the read cache.
type forgetSoldOut struct {
	natsbus.Invalidator
	store *postgres.Store
}

func (f forgetSoldOut) Invalidate(ctx context.Context, kind, partitionID, eventType string, data []byte) error {
	if kind == string(berth.KindHotel) && eventType != reservation.EventHeld && eventType != reservation.EventConfirmed {
		f.store.ForgetSoldOut(partitionID)
	}
	return f.Invalidator.Invalidate(ctx, kind, partitionID, eventType, data)
}
