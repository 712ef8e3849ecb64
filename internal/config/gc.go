package config

import (
	"os"
	"runtime/debug"
)

// ServiceGCPercent is the garbage collector's target for Berth's services
// when GOGC is not set: the heap may grow to five times what is live
// between collections, against Go's default of twice.
//
// The services keep little live heap (a few MiB, plus the search index in a
// booking service) and allocate per request, so at Go's default they
// collect many times a second under load, and most often right after a
// start, when the live heap — and so the heap goal — is smallest: the first
// flash sale on a freshly started platform paid for it in its losers' p99
// (docs/PERFORMANCE.md, "The collector's target"). A deployment bounds the
// larger heap with GOMEMLIMIT (deploy/k8s sets it to the container's memory
// limit), near which the collector works harder again instead of the process
// being killed.
const ServiceGCPercent = 400

// ServiceGC sets the collector's target of a service to ServiceGCPercent
// unless the operator set GOGC, and returns the target in force (-1: off).
func ServiceGC() int {
	if v, ok := os.LookupEnv("GOGC"); ok && v != "" {
		p := debug.SetGCPercent(100) // read the operator's value back …
		debug.SetGCPercent(p)        // … and keep it
		return p
	}
	debug.SetGCPercent(ServiceGCPercent)
	return ServiceGCPercent
}
