package k8s_test

import (
	"regexp"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Checks that span regions: the CockroachDB localities, the cluster-wide
// Jobs, and the DNS names one region uses to reach another.

// localities returns the region tier of every CockroachDB StatefulSet's
// --locality flag (the overlay appends it).
func localities(p *problems, where string, r *rendered) []string {
	var out []string
	for _, s := range r.statefulSets {
		for _, c := range s.Spec.Template.Spec.Containers {
			if !strings.HasPrefix(c.Image, "cockroachdb/cockroach:") || !slices.Contains(c.Args, "start") {
				continue
			}
			var flags []string
			for _, a := range c.Args {
				if v, ok := strings.CutPrefix(a, "--locality="); ok {
					flags = append(flags, v)
				}
			}
			if len(flags) != 1 {
				p.addf(where, "StatefulSet/%s: %d --locality flags, want 1", s.Name, len(flags))
			}
			for _, f := range flags {
				var region string
				for _, tier := range strings.Split(f, ",") {
					if v, ok := strings.CutPrefix(tier, "region="); ok {
						region = v
					}
				}
				out = append(out, region)
			}
		}
	}
	return out
}

// svcHost matches in-cluster DNS names: [pod.]service.namespace.svc.cluster.local[:port].
var svcHost = regexp.MustCompile(`((?:[a-z0-9](?:[-a-z0-9]*[a-z0-9])?\.){2,3})svc\.cluster\.local(?::([0-9]+))?`)

func checkAcrossRegions(p *problems, sets []*rendered) {
	var locs []string
	byNamespace := map[string]*rendered{}
	// Cluster-wide Jobs (components/cluster-jobs) must run from exactly one
	// region: `cockroach init` from two could bootstrap two clusters, and
	// migrations are not guarded by a lock.
	clusterJobs := map[string][]string{"cockroach init": nil, "booking migrate": nil}
	for _, r := range sets {
		byNamespace["berth-"+r.region] = r
		var ignore problems // reported per overlay by checkOverlay
		locs = append(locs, localities(&ignore, "", r)...)
		for _, j := range r.jobs {
			for _, c := range j.Spec.Template.Spec.Containers {
				cmdline := strings.Join(append(slices.Clone(c.Command), c.Args...), " ")
				for what := range clusterJobs {
					if strings.Contains(cmdline, what) {
						clusterJobs[what] = append(clusterJobs[what], r.region+"/"+j.Name)
					}
				}
			}
		}
	}
	slices.Sort(locs)
	want := slices.Sorted(slices.Values(regions))
	if !slices.Equal(locs, want) {
		p.addf("overlays", "CockroachDB localities across all overlays are region=%v, want exactly %v", locs, want)
	}
	for what, jobs := range clusterJobs {
		if len(jobs) != 1 {
			p.addf("overlays", "%d Jobs run `%s` (%v), want exactly 1", len(jobs), what, jobs)
		}
	}

	// Every cross-namespace DNS name (the CockroachDB --join list, NATS
	// gateways, BERTH_BOOKING_URLS) must name a Service, pod and port that
	// some overlay renders. Names outside Berth's namespaces are skipped.
	for _, r := range sets {
		seen := map[string]bool{}
		for _, doc := range r.docs {
			for _, m := range svcHost.FindAllStringSubmatch(string(doc), -1) {
				if seen[m[0]] {
					continue
				}
				seen[m[0]] = true
				parts := strings.Split(strings.TrimSuffix(m[1], "."), ".")
				ns := parts[len(parts)-1]
				target, ok := byNamespace[ns]
				if !ok {
					if strings.HasPrefix(ns, "berth-") {
						p.addf("overlays/"+r.region, "%s: no overlay renders namespace %s", m[0], ns)
					}
					continue
				}
				svc := findService(target, parts[len(parts)-2])
				if svc == nil {
					p.addf("overlays/"+r.region, "%s: no Service %s in %s", m[0], parts[len(parts)-2], ns)
					continue
				}
				if len(parts) == 3 && !isStatefulSetPod(target, svc, parts[0]) {
					p.addf("overlays/"+r.region, "%s: %s is not a pod of a StatefulSet governed by headless Service %s", m[0], parts[0], svc.Name)
				}
				if m[2] != "" {
					port, _ := strconv.Atoi(m[2])
					if !slices.ContainsFunc(svc.Spec.Ports, func(sp corev1.ServicePort) bool { return int(sp.Port) == port }) {
						p.addf("overlays/"+r.region, "%s: Service %s has no port %d", m[0], svc.Name, port)
					}
				}
			}
		}
	}
}

func isStatefulSetPod(r *rendered, svc *corev1.Service, pod string) bool {
	if svc.Spec.ClusterIP != corev1.ClusterIPNone {
		return false // per-pod DNS records exist only for headless Services
	}
	for _, s := range r.statefulSets {
		ord, ok := strings.CutPrefix(pod, s.Name+"-")
		n, err := strconv.Atoi(ord)
		if ok && err == nil && s.Spec.ServiceName == svc.Name && s.Spec.Replicas != nil && n >= 0 && n < int(*s.Spec.Replicas) {
			return true
		}
	}
	return false
}
