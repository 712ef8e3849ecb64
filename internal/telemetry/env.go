package telemetry

import (
	"fmt"
	"net/url"
	"os"
	"strconv"
)

// CheckEnv validates the OTEL_* variables Berth relies on, so a typo fails
// the start with a message naming the variable instead of silently losing
// every trace. It returns one message per problem.
func CheckEnv() []string {
	var errs []string
	add := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	if v := os.Getenv("OTEL_SDK_DISABLED"); v != "" {
		if _, err := strconv.ParseBool(v); err != nil {
			add("OTEL_SDK_DISABLED=%q: want true or false", v)
		}
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"} {
		v := os.Getenv(name)
		if v == "" {
			continue
		}
		u, err := url.Parse(v)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			add("%s=%q: want an http(s) URL such as http://otel-collector:4318", name, v)
		}
	}
	for _, name := range []string{"OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL"} {
		if v := os.Getenv(name); v != "" && v != "http/protobuf" {
			add("%s=%q: Berth exports traces over OTLP/HTTP only; want http/protobuf or unset", name, v)
		}
	}
	sampler := os.Getenv("OTEL_TRACES_SAMPLER")
	switch sampler {
	case "", "always_on", "always_off", "parentbased_always_on", "parentbased_always_off":
	case "traceidratio", "parentbased_traceidratio":
		if arg := os.Getenv("OTEL_TRACES_SAMPLER_ARG"); arg != "" {
			if r, err := strconv.ParseFloat(arg, 64); err != nil || r < 0 || r > 1 {
				add("OTEL_TRACES_SAMPLER_ARG=%q: want a ratio from 0 to 1", arg)
			}
		}
	default:
		add("OTEL_TRACES_SAMPLER=%q: want one of always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off, parentbased_traceidratio", sampler)
	}
	return errs
}
