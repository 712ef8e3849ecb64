// Package k8s_test checks Berth's Kubernetes manifests offline, as part of
// `go test ./...`: it renders every overlay with the kustomize API (what
// `kustomize build deploy/k8s/overlays/<region>` prints), decodes every object
// strictly into its typed Kubernetes struct, and checks the deployment policy
// (policy_test.go). TestValidationRejectsBrokenManifests proves the checks can
// fail, by breaking a copy of the tree one way at a time.
package k8s_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestManifests(t *testing.T) {
	t.Parallel()
	for _, p := range validate(".") {
		t.Error(p)
	}
}

// edit changes one file of a copy of deploy/k8s: it replaces the first
// occurrence of old (which must occur) by new, or, with old empty, writes new
// as the whole file, or, with from set, copies that file.
type edit struct {
	file, old, new, from string
}

// addPatch adds a JSON patch (YAML list of operations) on one object to an
// overlay's kustomization, after the base is built.
func addPatch(overlay, kind, name, ops string) edit {
	var b strings.Builder
	b.WriteString("patches:\n  - target:\n      kind: " + kind + "\n      name: " + name + "\n    patch: |-\n")
	for _, line := range strings.Split(strings.TrimSpace(ops), "\n") {
		b.WriteString("      " + line + "\n")
	}
	return edit{file: "overlays/" + overlay + "/kustomization.yaml", old: "patches:\n", new: b.String()}
}

func TestValidationRejectsBrokenManifests(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		edits []edit
		want  string // a substring of one reported problem; "" = no problem at all
	}{
		{
			name: "unchanged copy is clean",
			want: "",
		},
		{
			name:  "misspelled field",
			edits: []edit{{file: "base/router.yaml", old: "readinessProbe:", new: "readinesProbe:"}},
			want:  `unknown field "spec.template.spec.containers[0].readinesProbe"`,
		},
		{
			name:  "field in the wrong case, which the API server would drop",
			edits: []edit{{file: "base/booking.yaml", old: "livenessProbe:", new: "LivenessProbe:"}},
			want:  `unknown field "spec.template.spec.containers[0].LivenessProbe"`,
		},
		{
			name: "kind missing from the kinds table",
			edits: []edit{
				{file: "base/servicemonitor.yaml", new: "apiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata:\n  name: booking\nspec: {}\n"},
				{file: "base/kustomization.yaml", old: "  - network-policies.yaml\n", new: "  - network-policies.yaml\n  - servicemonitor.yaml\n"},
			},
			want: `unknown kind "ServiceMonitor"`,
		},
		{
			name:  "deployment without readiness probe",
			edits: []edit{addPatch("eu-west", "Deployment", "booking", "- op: remove\n  path: /spec/template/spec/containers/0/readinessProbe")},
			want:  "overlays/eu-west: Deployment/booking container booking: no readinessProbe",
		},
		{
			name:  "container without limits",
			edits: []edit{addPatch("ap-south", "Deployment", "router", "- op: remove\n  path: /spec/template/spec/containers/0/resources/limits")},
			want:  "overlays/ap-south: Deployment/router container router: no resources.limits.cpu",
		},
		{
			name:  "init container without resources",
			edits: []edit{addPatch("us-east", "StatefulSet", "cockroachdb", "- op: remove\n  path: /spec/template/spec/initContainers/0/resources")},
			want:  "StatefulSet/cockroachdb container copy-certs: no resources.requests.cpu",
		},
		{
			name: "probe on a plain init container",
			edits: []edit{addPatch("us-east", "StatefulSet", "cockroachdb",
				"- op: add\n  path: /spec/template/spec/initContainers/0/readinessProbe\n  value: {exec: {command: [\"true\"]}}")},
			want: "container copy-certs: probes on a plain init container",
		},
		{
			name:  "writable root filesystem",
			edits: []edit{addPatch("eu-west", "StatefulSet", "nats", "- op: remove\n  path: /spec/template/spec/containers/0/securityContext/readOnlyRootFilesystem")},
			want:  "StatefulSet/nats container nats: securityContext.readOnlyRootFilesystem is not true",
		},
		{
			name: "image on :latest",
			edits: []edit{addPatch("eu-west", "Deployment", "readmodel",
				"- op: replace\n  path: /spec/template/spec/containers/0/image\n  value: ghcr.io/berthhq/berth:latest")},
			want: `image "ghcr.io/berthhq/berth:latest" uses :latest`,
		},
		{
			name:  "untagged image",
			edits: []edit{{file: "base/redis.yaml", old: "image: redis:8.10.2-alpine", new: "image: redis"}},
			want:  `image "redis" has no tag`,
		},
		{
			name: "PodDisruptionBudget selecting other labels",
			edits: []edit{addPatch("us-east", "PodDisruptionBudget", "booking",
				"- op: replace\n  path: /spec/selector/matchLabels/app.kubernetes.io~1name\n  value: bookings")},
			want: "overlays/us-east: Deployment/booking: no PodDisruptionBudget selects its pods",
		},
		{
			name: "HorizontalPodAutoscaler targeting a typo",
			edits: []edit{addPatch("us-east", "HorizontalPodAutoscaler", "router",
				"- op: replace\n  path: /spec/scaleTargetRef/name\n  value: routr")},
			want: "overlays/us-east: Deployment/router: no HorizontalPodAutoscaler targets it",
		},
		{
			name:  "replicas fighting the HPA",
			edits: []edit{addPatch("ap-south", "Deployment", "booking", "- op: add\n  path: /spec/replicas\n  value: 3")},
			want:  "Deployment/booking: sets spec.replicas although an HPA owns the count",
		},
		{
			name:  "CockroachDB locality naming a region we do not have",
			edits: []edit{{file: "overlays/eu-west/kustomization.yaml", old: "value: --locality=region=eu-west", new: "value: --locality=region=eu-central"}},
			want:  "CockroachDB localities across all overlays are region=[ap-south eu-central us-east], want exactly [ap-south eu-west us-east]",
		},
		{
			name:  "overlay forgetting the CockroachDB locality",
			edits: []edit{{file: "overlays/ap-south/kustomization.yaml", old: "value: --locality=region=ap-south", new: "value: --max-offset=250ms"}},
			want:  "overlays/ap-south: StatefulSet/cockroachdb: 0 --locality flags, want 1",
		},
		{
			name:  "BERTH_REGION not matching the overlay",
			edits: []edit{{file: "overlays/ap-south/kustomization.yaml", old: "BERTH_REGION=ap-south", new: "BERTH_REGION=us-east"}},
			want:  `BERTH_REGION resolves to "us-east", want "ap-south"`,
		},
		{
			name:  "namespace not matching the overlay",
			edits: []edit{{file: "overlays/eu-west/kustomization.yaml", old: "namespace: berth-eu-west", new: "namespace: berth-eu-central"}},
			want:  `Deployment/booking is in namespace "berth-eu-central", want "berth-eu-west"`,
		},
		{
			name: "cluster-wide jobs in two regions",
			edits: []edit{{file: "overlays/eu-west/kustomization.yaml",
				old: "  - ../../components/release\n", new: "  - ../../components/cluster-jobs\n  - ../../components/release\n"}},
			want: "2 Jobs run `cockroach init` ([eu-west/cockroachdb-init us-east/cockroachdb-init]), want exactly 1",
		},
		{
			name:  "cluster-wide jobs in no region",
			edits: []edit{{file: "overlays/us-east/kustomization.yaml", old: "  - ../../components/cluster-jobs\n", new: ""}},
			want:  "0 Jobs run `booking migrate` ([]), want exactly 1",
		},
		{
			name:  "overlay without the release component",
			edits: []edit{{file: "overlays/ap-south/kustomization.yaml", old: "components:\n  - ../../components/release\n", new: ""}},
			want:  `overlays/ap-south: Deployment/router container router: image "ghcr.io/berthhq/berth" has no tag`,
		},
		{
			name:  "join list naming a node that does not exist",
			edits: []edit{{file: "base/cockroachdb.yaml", old: "cockroachdb-2.cockroachdb.berth-ap-south", new: "cockroachdb-3.cockroachdb.berth-ap-south"}},
			want:  "cockroachdb-3 is not a pod of a StatefulSet governed by headless Service cockroachdb",
		},
		{
			name:  "booking URL naming a namespace no overlay renders",
			edits: []edit{{file: "base/kustomization.yaml", old: "booking.berth-ap-south.svc", new: "booking.berth-ap-southeast.svc"}},
			want:  "no overlay renders namespace berth-ap-southeast",
		},
		{
			name:  "undefined $(VAR) in args",
			edits: []edit{{file: "base/router.yaml", old: "--region=$(BERTH_REGION)", new: "--region=$(BERTH_REGOIN)"}},
			want:  "refers to $(BERTH_REGOIN), which is not defined",
		},
		{
			name:  "secret key missing from the template",
			edits: []edit{{file: "base/nats.yaml", old: "key: NATS_PASSWORD", new: "key: NATS_PASS"}},
			want:  `Secret "berth-infra" in secret.example.yaml has no key "NATS_PASS"`,
		},
		{
			name:  "secret template rendered as a resource",
			edits: []edit{{file: "base/kustomization.yaml", old: "  - network-policies.yaml\n", new: "  - network-policies.yaml\n  - secret.example.yaml\n"}},
			want:  "Secret/berth-app is rendered",
		},
		{
			name:  "NetworkPolicy selecting nothing",
			edits: []edit{{file: "base/network-policies.yaml", old: "app.kubernetes.io/name: router", new: "app.kubernetes.io/name: ruoter"}},
			want:  "NetworkPolicy/router-ingress: podSelector selects no pods",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := t.TempDir()
			if err := os.CopyFS(root, os.DirFS(".")); err != nil {
				t.Fatal(err)
			}
			for _, e := range tt.edits {
				applyEdit(t, root, e)
			}
			got := validate(root)
			if tt.want == "" {
				for _, p := range got {
					t.Errorf("unexpected problem: %s", p)
				}
				return
			}
			for _, p := range got {
				if strings.Contains(p, tt.want) {
					return
				}
			}
			t.Errorf("no problem contains %q; got %d:\n%s", tt.want, len(got), strings.Join(got, "\n"))
		})
	}
}

func applyEdit(t *testing.T, root string, e edit) {
	t.Helper()
	path := filepath.Join(root, filepath.FromSlash(e.file))
	var out string
	switch {
	case e.from != "":
		b, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(e.from)))
		if err != nil {
			t.Fatal(err)
		}
		out = string(b)
	case e.old == "":
		out = e.new
	default:
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(b), e.old) {
			t.Fatalf("%s does not contain %q: the test case no longer breaks anything", e.file, e.old)
		}
		out = strings.Replace(string(b), e.old, e.new, 1)
	}
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
}
