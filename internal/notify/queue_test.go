package notify_test

import (
	"github.com/berthhq/berth/internal/notify"
	"github.com/berthhq/berth/internal/postgres"
)

// The store's notification queue is the one the notifier drains.
var _ notify.Queue = (*postgres.Notifications)(nil)
