package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// PprofAddrEnv names the ops listener of net/http/pprof. Profiles show
// memory and stacks, so they are never served on the public port and are off
// unless an operator sets this, to a loopback or private address
// (e.g. 127.0.0.1:6060); `go tool pprof http://<addr>/debug/pprof/profile`.
const PprofAddrEnv = "BERTH_PPROF_ADDR"

// ServePprof serves net/http/pprof on its own listener at addr until ctx
// ends; an empty addr serves nothing. It returns the address it listens on.
func ServePprof(ctx context.Context, addr string, log *slog.Logger) (string, error) {
	if addr == "" {
		return "", nil
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return "", fmt.Errorf("%s=%q: want host:port: %w", PprofAddrEnv, addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", fmt.Errorf("%s: %w", PprofAddrEnv, err)
	}
	// No write timeout: a CPU profile streams for its ?seconds=.
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) && log != nil {
			log.Warn("pprof listener stopped", "err", err)
		}
	}()
	go func() {
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = srv.Shutdown(sctx)
	}()
	if log != nil {
		log.Info("pprof listening", "addr", ln.Addr().String())
	}
	return ln.Addr().String(), nil
}
