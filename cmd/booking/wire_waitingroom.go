package main

import (
	"context"
	"os"

	"github.com/berthhq/berth/internal/cli"
	"github.com/berthhq/berth/internal/waitingroom"
)

// wireWaitingRoom gates clinic appointment holds during the clinics'
// waiting-room windows (BERTH_WAITING_ROOMS, BERTH_WAITING_ROOM_KEYS — the
// same values the routers serve the waiting room with). The gate verifies
// access tokens with the shared keys; it needs no Redis.
func wireWaitingRoom(_ context.Context, w *wiring) error {
	windows, keys, err := waitingroom.Parse(os.Getenv(waitingroom.WindowsEnvVar), os.Getenv(waitingroom.KeysEnvVar))
	if err != nil {
		return cli.Usage(err)
	}
	if len(windows) == 0 {
		return nil
	}
	w.api.WaitingRoom = waitingroom.NewGate(windows, keys, nil)
	w.log.Info("waiting rooms", "clinics", len(windows), "signing_key", keys.SigningKeyID())
	return nil
}
