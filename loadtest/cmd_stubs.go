package main

import "github.com/spf13/cobra"

func baselineCmd() *cobra.Command      { return &cobra.Command{Use: "baseline", Hidden: true} }
func regionMoveCmd() *cobra.Command    { return &cobra.Command{Use: "region-move", Hidden: true} }
func soakCmd() *cobra.Command          { return &cobra.Command{Use: "soak", Hidden: true} }
func clinicOpeningCmd() *cobra.Command { return &cobra.Command{Use: "clinic-opening", Hidden: true} }
func compareCmd() *cobra.Command       { return &cobra.Command{Use: "compare", Hidden: true} }
func seedCmd() *cobra.Command          { return &cobra.Command{Use: "seed", Hidden: true} }
func strategiesCmd() *cobra.Command    { return &cobra.Command{Use: "strategies", Hidden: true} }
