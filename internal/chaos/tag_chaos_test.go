//go:build chaos

package chaos

// chaosTag: built with -tags chaos, the long suite runs.
const chaosTag = true
