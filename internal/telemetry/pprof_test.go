package telemetry_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/berthhq/berth/internal/telemetry"
)

func TestPprofOnlyWhereConfigured(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if addr, err := telemetry.ServePprof(ctx, "", nil); addr != "" || err != nil {
		t.Fatalf("unset: served at %q (%v)", addr, err)
	}
	if _, err := telemetry.ServePprof(ctx, "6060", nil); err == nil {
		t.Fatal("an address without a host:port was accepted")
	}
	addr, err := telemetry.ServePprof(ctx, "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "goroutine") {
		t.Fatalf("goroutine profile: %d %.200s", resp.StatusCode, body)
	}
}
