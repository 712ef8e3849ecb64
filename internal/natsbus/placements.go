package natsbus

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"time"

	"github.com/berthhq/berth/internal/berth"
	"github.com/berthhq/berth/internal/events"
	"github.com/nats-io/nats.go"
)

// PlacementMovedSubject matches every placement.moved event of every
// partition (subjects are berth.<kind>.<partition_id>.<event type>).
const PlacementMovedSubject = "berth.*.*.placement.moved"

// PlacementApplier takes a new home region for a partition; it must ignore
// versions older than what it has (placement.Directory.Apply does).
type PlacementApplier func(kind berth.Kind, partitionID, region string, version int64) bool

// movedData is the data of a placement.moved event.
type movedData struct {
	Kind        berth.Kind `json:"kind"`
	PartitionID string     `json:"partition_id"`
	ToRegion    string     `json:"to_region"`
	Version     int64      `json:"version"`
}

// FollowPlacements applies placement.moved events to a router's directory
// as they are published, until ctx ends. It uses a plain subscription: a
// message missed while disconnected costs nothing for correctness — the
// booking service fences every write (421) and the directory also refreshes
// itself periodically — only a 421 round trip.
func FollowPlacements(ctx context.Context, url string, apply PlacementApplier, log *slog.Logger) error {
	nc, err := nats.Connect(url, nats.Name("berth-router-placements"), nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second), nats.RetryOnFailedConnect(true))
	if err != nil {
		return fmt.Errorf("connect nats: %w", err)
	}
	defer nc.Close()
	sub, err := nc.Subscribe(PlacementMovedSubject, func(m *nats.Msg) {
		if err := applyMoved(m.Data, apply); err != nil {
			log.Warn("placement.moved: bad event", "subject", m.Subject, "err", err)
		}
	})
	if err != nil {
		return fmt.Errorf("subscribe %s: %w", PlacementMovedSubject, err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	<-ctx.Done()
	return nil
}

func applyMoved(body []byte, apply PlacementApplier) error {
	var env events.Envelope
	if err := json.Unmarshal(body, &env); err != nil {
		return fmt.Errorf("decode envelope: %w", err)
	}
	var d movedData
	if err := json.Unmarshal(env.Data, &d); err != nil {
		return fmt.Errorf("decode data: %w", err)
	}
	if !d.Kind.Valid() || d.PartitionID == "" || !berth.ValidRegion(d.ToRegion) || d.Version < 1 {
		return fmt.Errorf("incomplete placement.moved event %s", env.ID)
	}
	apply(d.Kind, d.PartitionID, d.ToRegion, d.Version)
	return nil
}
