// Package events is the vocabulary of Berth's event stream: the outbox
// record a booking transaction writes, the CloudEvents 1.0 envelope it is
// published in, and the subject it is published on. It imports only the
// standard library, so the relay, the consumers and the stores share it
// without importing each other.
package events

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Record is one outbox row as the relay reads it.
type Record struct {
	PartitionID      string
	EventID          string
	HomeRegion       string
	Kind             string // hotel | clinic
	Type             string // reservation.confirmed, appointment.held, refund_requested …
	AggregateID      string
	AggregateVersion int64
	Seq              int
	Payload          []byte // JSON
	CreatedAt        time.Time
	// TraceContext holds the W3C trace-context fields (traceparent, and
	// tracestate when set) of the request that wrote the event, so the
	// request's trace continues through the relay to every consumer; nil
	// when the write was not traced.
	TraceContext map[string]string
}

// SpecVersion is the CloudEvents version of every envelope.
const SpecVersion = "1.0"

// Envelope is a CloudEvents 1.0 event in structured JSON mode. The
// attribute names are CloudEvents' own, so partners can read the stream with
// stock tooling; aggregateversion, kind and partitionid are extensions
// (lower-case alphanumerics, as the spec requires).
type Envelope struct {
	SpecVersion      string          `json:"specversion"`
	ID               string          `json:"id"`
	Source           string          `json:"source"`
	Type             string          `json:"type"`
	Subject          string          `json:"subject"`
	Time             time.Time       `json:"time"`
	DataContentType  string          `json:"datacontenttype"`
	Data             json.RawMessage `json:"data"`
	AggregateVersion int64           `json:"aggregateversion"`
	Kind             string          `json:"kind"`
	PartitionID      string          `json:"partitionid"`
}

// FromRecord builds the envelope of an outbox record. The CloudEvents
// subject is the aggregate (the reservation or appointment id); the source
// names the partition, which is what makes (source, id) unique.
func FromRecord(r Record) Envelope {
	return Envelope{
		SpecVersion:      SpecVersion,
		ID:               r.EventID,
		Source:           "/berth/" + r.Kind + "/" + r.PartitionID,
		Type:             r.Type,
		Subject:          r.AggregateID,
		Time:             r.CreatedAt.UTC(),
		DataContentType:  "application/json",
		Data:             json.RawMessage(r.Payload),
		AggregateVersion: r.AggregateVersion,
		Kind:             r.Kind,
		PartitionID:      r.PartitionID,
	}
}

// Decode parses and checks an envelope.
func Decode(b []byte) (Envelope, error) {
	var e Envelope
	if err := json.Unmarshal(b, &e); err != nil {
		return e, fmt.Errorf("decode event: %w", err)
	}
	return e, e.Check()
}

// Check reports what makes an envelope invalid (Decode's rules), or nil.
func (e Envelope) Check() error {
	switch {
	case e.SpecVersion != SpecVersion:
		return fmt.Errorf("decode event: specversion %q, want %s", e.SpecVersion, SpecVersion)
	case e.ID == "" || e.Type == "" || e.Source == "":
		return errors.New("decode event: id, type and source are required")
	case e.Kind != "hotel" && e.Kind != "clinic":
		return fmt.Errorf("decode event: unknown kind %q", e.Kind)
	}
	return nil
}

// SubjectPrefix starts every subject of the stream.
const SubjectPrefix = "berth."

// Subject is where a record is published: berth.<kind>.<partition_id>.<event_type>.
// Event types may contain dots (reservation.held); they become extra tokens.
func Subject(kind, partitionID, typ string) string {
	return SubjectPrefix + kind + "." + partitionID + "." + typ
}

// DeadLetterSubject is where a consumer parks a message it gave up on:
// berth.dlq.<consumer>.<original subject without "berth.">.
func DeadLetterSubject(consumer, subject string) string {
	return SubjectPrefix + "dlq." + consumer + "." + strings.TrimPrefix(subject, SubjectPrefix)
}
