// Command loadtest is the SRE suite that drives a running Berth platform;
// its scenarios arrive with the [loadtest] issue.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	root := &cobra.Command{Use: "loadtest", Short: "Berth's SRE loadtest suite", SilenceUsage: true, SilenceErrors: true}
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "loadtest:", err)
		os.Exit(1)
	}
}
