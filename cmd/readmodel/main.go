// Command readmodel is part of Berth; its commands arrive with their issues.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

func main() {
	root := &cobra.Command{
		Use:           "readmodel",
		Short:         "Berth's readmodel",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "readmodel:", err)
		os.Exit(1)
	}
}
