package ratelimit

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// The scopes a rule may name. Each request is checked against every scope
// that applies to it (see Classify); a scope without a rule is unlimited.
const (
	// ScopeHotelWrites: writes on /v1/hotels/{id}/…, keyed by hotel, so a
	// flash sale on one hotel spends only that hotel's budget.
	ScopeHotelWrites = "hotel_writes"
	// ScopeClinicWrites: writes on /v1/clinics/{id}/…, keyed by clinic.
	ScopeClinicWrites = "clinic_writes"
	// ScopeClientReads: GET/HEAD requests, keyed by client identity.
	ScopeClientReads = "client_reads"
	// ScopeClientWrites: every other write, keyed by client identity.
	ScopeClientWrites = "client_writes"
	// ScopeGuestHolds: hotel reservation holds and clinic appointment holds,
	// keyed by the guest (token subject; the client identity otherwise).
	ScopeGuestHolds = "guest_holds"
)

// Scopes lists every scope a rule may name.
var Scopes = []string{ScopeHotelWrites, ScopeClinicWrites, ScopeClientReads, ScopeClientWrites, ScopeGuestHolds}

// EnvVar is the variable the rules are read from.
const EnvVar = "BERTH_RATE_LIMITS"

// Limit is a sustained rate with a burst: Burst requests may arrive at once,
// then one more every 1/Rate seconds.
type Limit struct {
	Rate  float64 // requests per second, > 0
	Burst int     // ≥ 1
}

func (l Limit) String() string {
	return strconv.FormatFloat(l.Rate, 'g', -1, 64) + "/s:" + strconv.Itoa(l.Burst)
}

// Rules maps a scope to its limit.
type Rules map[string]Limit

// String renders rules in the syntax ParseRules reads, sorted by scope.
func (rs Rules) String() string {
	names := make([]string, 0, len(rs))
	for n := range rs {
		names = append(names, n)
	}
	sort.Strings(names)
	parts := make([]string, 0, len(names))
	for _, n := range names {
		parts = append(parts, n+"="+rs[n].String())
	}
	return strings.Join(parts, ",")
}

// ParseRules reads "scope=N/unit[:burst],…", e.g.
// "hotel_writes=200/s:400,client_reads=100/s,guest_holds=5/s:10".
// unit is s, m or h; the burst defaults to the rate per second (at least 1).
// An empty string means no limits. Errors name the variable (name).
func ParseRules(name, v string) (Rules, error) {
	rules := Rules{}
	if strings.TrimSpace(v) == "" {
		return rules, nil
	}
	for _, part := range strings.Split(v, ",") {
		part = strings.TrimSpace(part)
		scope, spec, ok := strings.Cut(part, "=")
		scope = strings.TrimSpace(scope)
		if !ok || scope == "" {
			return nil, fmt.Errorf("%s: %q: want scope=N/unit[:burst], e.g. hotel_writes=200/s:400", name, part)
		}
		if !validScope(scope) {
			return nil, fmt.Errorf("%s: unknown scope %q: want one of %s", name, scope, strings.Join(Scopes, ", "))
		}
		if _, dup := rules[scope]; dup {
			return nil, fmt.Errorf("%s: scope %q given twice", name, scope)
		}
		lim, err := parseLimit(strings.TrimSpace(spec))
		if err != nil {
			return nil, fmt.Errorf("%s: %s=%q: %w", name, scope, spec, err)
		}
		rules[scope] = lim
	}
	return rules, nil
}

func validScope(s string) bool {
	for _, v := range Scopes {
		if v == s {
			return true
		}
	}
	return false
}

func parseLimit(spec string) (Limit, error) {
	rate, burstStr, hasBurst := strings.Cut(spec, ":")
	n, unit, ok := strings.Cut(rate, "/")
	if !ok {
		return Limit{}, fmt.Errorf("want N/s, N/m or N/h")
	}
	count, err := strconv.ParseFloat(strings.TrimSpace(n), 64)
	if err != nil || count <= 0 || math.IsInf(count, 0) || math.IsNaN(count) {
		return Limit{}, fmt.Errorf("the rate must be a positive number")
	}
	var per float64
	switch strings.TrimSpace(unit) {
	case "s":
		per = 1
	case "m":
		per = 60
	case "h":
		per = 3600
	default:
		return Limit{}, fmt.Errorf("unit %q: want s, m or h", unit)
	}
	lim := Limit{Rate: count / per}
	if lim.Rate > 1e6 || lim.Rate < 1.0/86400 {
		return Limit{}, fmt.Errorf("the rate must be between 1/day and 1,000,000/s")
	}
	if hasBurst {
		b, err := strconv.Atoi(strings.TrimSpace(burstStr))
		if err != nil || b < 1 || b > 1_000_000 {
			return Limit{}, fmt.Errorf("the burst must be an integer from 1 to 1000000")
		}
		lim.Burst = b
	} else {
		lim.Burst = max(1, int(math.Ceil(lim.Rate)))
	}
	return lim, nil
}
