//go:build !chaos

package chaos

// chaosTag: without -tags chaos, BERTH_CHAOS_LONG=1 selects the long suite.
const chaosTag = false
