package main

import (
	"fmt"
	"os"
	"runtime/pprof"

	"github.com/spf13/cobra"
)

// cpuProfile is the --cpuprofile flag every command shares: a CPU profile
// of the generator itself, from the command's start to its end (seeding and
// the audit included; `go tool pprof -focus engine.Run` keeps the load).
// The generator shares the machine with what it measures, so what it spends
// per request is worth seeing.
type cpuProfile struct {
	path string
	f    *os.File
}

func (p *cpuProfile) register(root *cobra.Command) {
	root.PersistentFlags().StringVar(&p.path, "cpuprofile", "", "write a CPU profile of the loadtest process to this file")
	root.PersistentPreRunE = func(*cobra.Command, []string) error { return p.start() }
}

func (p *cpuProfile) start() error {
	if p.path == "" {
		return nil
	}
	f, err := os.Create(p.path)
	if err != nil {
		return fmt.Errorf("--cpuprofile: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return fmt.Errorf("--cpuprofile: %w", err)
	}
	p.f = f
	return nil
}

// stop ends the profile, whether the command succeeded or not (a failed
// run's profile is as telling), and is a no-op when none was started.
func (p *cpuProfile) stop() error {
	if p.f == nil {
		return nil
	}
	pprof.StopCPUProfile()
	err := p.f.Close()
	p.f = nil
	if err != nil {
		return fmt.Errorf("--cpuprofile: %w", err)
	}
	return nil
}
