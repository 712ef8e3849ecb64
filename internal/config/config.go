// Package config reads Berth's settings from BERTH_* environment variables
// (cobra flags override them) and validates them at start, naming the
// variable in every error.
package config

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Env returns the variable's value or def.
func Env(name, def string) string {
	if v, ok := os.LookupEnv(name); ok && v != "" {
		return v
	}
	return def
}

// Duration parses a duration variable, or returns def when unset.
func Duration(name string, def time.Duration) (time.Duration, error) {
	v := Env(name, "")
	if v == "" {
		return def, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%s=%q: want a duration such as 10m or 2s", name, v)
	}
	return d, nil
}

// Int parses an integer variable, or returns def when unset.
func Int(name string, def int) (int, error) {
	v := Env(name, "")
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0, fmt.Errorf("%s=%q: want an integer", name, v)
	}
	return n, nil
}

// Bool parses a boolean variable, or returns def when unset.
func Bool(name string, def bool) (bool, error) {
	v := Env(name, "")
	if v == "" {
		return def, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s=%q: want true or false", name, v)
	}
	return b, nil
}

// RegionURLs parses "region=url,region=url".
func RegionURLs(name, v string) (map[string]string, error) {
	out := map[string]string{}
	if strings.TrimSpace(v) == "" {
		return out, nil
	}
	for _, part := range strings.Split(v, ",") {
		region, url, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok || region == "" || url == "" {
			return nil, fmt.Errorf("%s: %q: want region=url", name, part)
		}
		out[region] = url
	}
	return out, nil
}

// Errors collects validation errors so all are reported at once.
type Errors []string

// Add records an error.
func (e *Errors) Add(format string, args ...any) { *e = append(*e, fmt.Sprintf(format, args...)) }

// Check records err when it is not nil.
func (e *Errors) Check(err error) {
	if err != nil {
		*e = append(*e, err.Error())
	}
}

// Err returns the collected errors as one, or nil.
func (e Errors) Err() error {
	if len(e) == 0 {
		return nil
	}
	return fmt.Errorf("invalid configuration:\n  %s", strings.Join(e, "\n  "))
}
