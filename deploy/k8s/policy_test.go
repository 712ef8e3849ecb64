package k8s_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// regions are Berth's regions: exactly one overlay each, and exactly the
// CockroachDB localities (the schema/cockroach overlay's crdb_region values).
var regions = []string{"us-east", "eu-west", "ap-south"}

const (
	partOfLabel = "app.kubernetes.io/part-of" // "berth pods" for the NetworkPolicies
	regionLabel = "berth.io/region"
)

// problems collects policy violations, one readable line each.
type problems []string

func (p *problems) addf(where, format string, args ...any) {
	*p = append(*p, where+": "+fmt.Sprintf(format, args...))
}

// validate renders every overlay below root/overlays and returns every
// violation of the deployment policy. It is the whole check: TestManifests
// wants none, TestValidationRejectsBrokenManifests wants a given one.
func validate(root string) problems {
	var p problems
	secrets, err := readSecretTemplate(filepath.Join(root, "base", "secret.example.yaml"))
	if err != nil {
		p.addf("base/secret.example.yaml", "%v", err)
	}
	entries, err := os.ReadDir(filepath.Join(root, "overlays"))
	if err != nil {
		p.addf("overlays", "%v", err)
		return p
	}
	var sets []*rendered
	var dirs []string
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		dirs = append(dirs, e.Name())
		r, err := render(filepath.Join(root, "overlays", e.Name()))
		if err != nil {
			p.addf("overlays/"+e.Name(), "%v", err)
		}
		if r != nil {
			r.region = e.Name()
			sets = append(sets, r)
		}
	}
	if !sameSet(dirs, regions) {
		p.addf("overlays", "directories %v, want exactly one per region %v", dirs, regions)
	}
	for _, r := range sets {
		checkOverlay(&p, r, secrets)
	}
	checkAcrossRegions(&p, sets)
	return p
}

func checkOverlay(p *problems, r *rendered, secrets secretTemplate) {
	where := "overlays/" + r.region
	ns := "berth-" + r.region

	// Region: namespace, labels, BERTH_REGION.
	if !slices.ContainsFunc(r.namespaces, func(n *corev1.Namespace) bool {
		return n.Name == ns && n.Labels[partOfLabel] == "berth" && n.Labels["pod-security.kubernetes.io/enforce"] == "restricted"
	}) {
		p.addf(where, "no Namespace %s labelled %s=berth (the NetworkPolicies' namespaceSelector) and pod-security.kubernetes.io/enforce=restricted", ns, partOfLabel)
	}
	for _, o := range r.all {
		if o.kind != "Namespace" && o.obj.GetNamespace() != ns {
			p.addf(where, "%s is in namespace %q, want %q", o, o.obj.GetNamespace(), ns)
		}
		if got := o.obj.GetLabels()[regionLabel]; got != r.region {
			p.addf(where, "%s has label %s=%q, want %q", o, regionLabel, got, r.region)
		}
	}
	cm := findConfigMap(r, "berth-config")
	if cm == nil {
		p.addf(where, "no berth-config ConfigMap")
	} else if got := cm.Data["BERTH_REGION"]; got != r.region {
		p.addf(where, "ConfigMap/%s: BERTH_REGION=%q, want %q", cm.Name, got, r.region)
	}
	// Real secrets are created out of band; a rendered Secret means someone
	// listed secret.example.yaml (placeholders) or a real one as a resource.
	for _, s := range r.secrets {
		p.addf(where, "Secret/%s is rendered; Secrets must be created out of band (base/secret.example.yaml)", s.Name)
	}

	for _, w := range workloads(r) {
		checkPod(p, where+": "+w.String(), r, w, secrets)
	}
	for _, d := range r.deployments {
		checkDeployment(p, where+": Deployment/"+d.Name, r, d)
	}
	for _, s := range r.statefulSets {
		checkStatefulSet(p, where+": StatefulSet/"+s.Name, r, s)
	}
	for _, h := range r.hpas {
		ref := h.Spec.ScaleTargetRef
		if ref.APIVersion != "apps/v1" || ref.Kind != "Deployment" ||
			!slices.ContainsFunc(r.deployments, func(d *appsv1.Deployment) bool { return d.Name == ref.Name }) {
			p.addf(where, "HorizontalPodAutoscaler/%s targets %s %s/%s, which is not a rendered Deployment", h.Name, ref.APIVersion, ref.Kind, ref.Name)
		}
	}
	checkPDBs(p, where, r)
	checkServices(p, where, r)
	checkNetworkPolicies(p, where, r)
	if loc := localities(p, where, r); len(loc) != 1 || loc[0] != r.region {
		p.addf(where, "CockroachDB StatefulSet localities region=%v, want exactly [%s]", loc, r.region)
	}
}

// workload is anything with a pod template.
type workload struct {
	kind, name string
	pod        *corev1.PodTemplateSpec
	isJob      bool
	claims     []string // StatefulSet volumeClaimTemplates, mountable like volumes
}

func (w workload) String() string { return w.kind + "/" + w.name }

func workloads(r *rendered) []workload {
	var ws []workload
	for _, d := range r.deployments {
		ws = append(ws, workload{kind: "Deployment", name: d.Name, pod: &d.Spec.Template})
	}
	for _, s := range r.statefulSets {
		w := workload{kind: "StatefulSet", name: s.Name, pod: &s.Spec.Template}
		for _, c := range s.Spec.VolumeClaimTemplates {
			w.claims = append(w.claims, c.Name)
		}
		ws = append(ws, w)
	}
	for _, j := range r.jobs {
		ws = append(ws, workload{kind: "Job", name: j.Name, pod: &j.Spec.Template, isJob: true})
	}
	return ws
}

func checkPod(p *problems, where string, r *rendered, w workload, secrets secretTemplate) {
	spec := &w.pod.Spec
	if w.pod.Labels[partOfLabel] != "berth" {
		p.addf(where, "pod template lacks label %s=berth: the NetworkPolicies would treat it as a stranger", partOfLabel)
	}
	podNonRoot := spec.SecurityContext != nil && isTrue(spec.SecurityContext.RunAsNonRoot)
	podSeccomp := spec.SecurityContext != nil && spec.SecurityContext.SeccompProfile != nil
	volumes := map[string]bool{}
	for _, c := range w.claims {
		volumes[c] = true
	}
	for _, v := range spec.Volumes {
		volumes[v.Name] = true
		switch {
		case v.ConfigMap != nil && !isTrue(v.ConfigMap.Optional):
			checkConfigMapKeys(p, where, r, v.ConfigMap.Name, keysOf(v.ConfigMap.Items))
		case v.Secret != nil && !isTrue(v.Secret.Optional):
			checkSecretKeys(p, where, secrets, v.Secret.SecretName, keysOf(v.Secret.Items))
		}
	}

	type entry struct {
		c    corev1.Container
		init bool
	}
	var all []entry
	for _, c := range spec.InitContainers {
		all = append(all, entry{c, true})
	}
	for _, c := range spec.Containers {
		all = append(all, entry{c, false})
	}
	for _, e := range all {
		c := e.c
		at := where + " container " + c.Name
		checkImage(p, at, c.Image)
		for _, rl := range []struct {
			name string
			list corev1.ResourceList
		}{{"requests", c.Resources.Requests}, {"limits", c.Resources.Limits}} {
			for _, res := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
				if q, ok := rl.list[res]; !ok || q.IsZero() {
					p.addf(at, "no resources.%s.%s", rl.name, res)
				}
			}
		}

		sc := c.SecurityContext
		switch {
		case sc == nil:
			p.addf(at, "no securityContext")
		default:
			if !isTrue(sc.ReadOnlyRootFilesystem) {
				p.addf(at, "securityContext.readOnlyRootFilesystem is not true")
			}
			if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				p.addf(at, "securityContext.allowPrivilegeEscalation is not false")
			}
			if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") {
				p.addf(at, "securityContext.capabilities.drop lacks ALL")
			}
			if !podNonRoot && !isTrue(sc.RunAsNonRoot) {
				p.addf(at, "runAsNonRoot is set neither on the pod nor on the container")
			}
			if !podSeccomp && sc.SeccompProfile == nil {
				p.addf(at, "seccompProfile is set neither on the pod nor on the container (Pod Security \"restricted\")")
			}
		}

		// Probes. The API server rejects probes on plain init containers; a
		// native sidecar (init container with restartPolicy Always) runs for
		// the pod's lifetime and needs them like any container. Jobs run to
		// completion and are exempt.
		sidecar := e.init && c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
		switch {
		case e.init && !sidecar:
			if c.ReadinessProbe != nil || c.LivenessProbe != nil || c.StartupProbe != nil {
				p.addf(at, "probes on a plain init container are rejected by the API server")
			}
		case !w.isJob:
			if c.ReadinessProbe == nil {
				p.addf(at, "no readinessProbe")
			}
			if c.LivenessProbe == nil {
				p.addf(at, "no livenessProbe")
			}
		}
		for _, probe := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe, c.StartupProbe} {
			if probe == nil {
				continue
			}
			if probe.HTTPGet != nil {
				checkNamedPort(p, at, c, probe.HTTPGet.Port)
			}
			if probe.TCPSocket != nil {
				checkNamedPort(p, at, c, probe.TCPSocket.Port)
			}
		}

		for _, m := range c.VolumeMounts {
			if !volumes[m.Name] {
				p.addf(at, "volumeMount %q has no volume", m.Name)
			}
		}
		env := checkEnv(p, at, r, c, secrets)
		if w.kind == "Deployment" && env["BERTH_REGION"] != r.region {
			p.addf(at, "BERTH_REGION resolves to %q, want %q", env["BERTH_REGION"], r.region)
		}
	}
}

// checkEnv checks that every ConfigMap and Secret the container reads exists
// (Secrets: in secret.example.yaml) and that every $(VAR) the kubelet is to
// expand is defined, and returns the variables whose values are known from
// the manifests.
func checkEnv(p *problems, at string, r *rendered, c corev1.Container, secrets secretTemplate) map[string]string {
	known := map[string]string{} // name -> value, where the manifests say
	defined := map[string]bool{} // every name the container will have
	for _, from := range c.EnvFrom {
		switch {
		case from.ConfigMapRef != nil:
			cm := r.configMaps[from.ConfigMapRef.Name]
			if cm == nil {
				if !isTrue(from.ConfigMapRef.Optional) {
					p.addf(at, "envFrom ConfigMap %q is not rendered", from.ConfigMapRef.Name)
				}
				continue
			}
			for k, v := range cm.Data {
				known[from.Prefix+k], defined[from.Prefix+k] = v, true
			}
		case from.SecretRef != nil:
			keys, ok := secrets[from.SecretRef.Name]
			if !ok && !isTrue(from.SecretRef.Optional) {
				p.addf(at, "envFrom Secret %q is not in secret.example.yaml", from.SecretRef.Name)
			}
			for k := range keys {
				defined[from.Prefix+k] = true
			}
		}
	}
	// Env entries may refer to earlier entries and to envFrom; command and
	// args to all of them.
	for _, e := range c.Env {
		checkVarRefs(p, at, "env "+e.Name, e.Value, defined)
		defined[e.Name] = true
		delete(known, e.Name) // env overrides envFrom
		switch {
		case e.ValueFrom == nil:
			known[e.Name] = e.Value
		case e.ValueFrom.ConfigMapKeyRef != nil:
			ref := e.ValueFrom.ConfigMapKeyRef
			if cm := checkConfigMapKeys(p, at, r, ref.Name, []string{ref.Key}); cm != nil {
				known[e.Name] = cm.Data[ref.Key]
			}
		case e.ValueFrom.SecretKeyRef != nil:
			ref := e.ValueFrom.SecretKeyRef
			checkSecretKeys(p, at, secrets, ref.Name, []string{ref.Key})
		}
	}
	for _, s := range append(slices.Clone(c.Command), c.Args...) {
		checkVarRefs(p, at, "command/args", s, defined)
	}
	return known
}

// varRef is the kubelet's $(VAR) syntax; $$(VAR) is an escaped literal.
var varRef = regexp.MustCompile(`\$?\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)

func checkVarRefs(p *problems, at, field, s string, defined map[string]bool) {
	for _, m := range varRef.FindAllStringSubmatch(s, -1) {
		if strings.HasPrefix(m[0], "$$") {
			continue
		}
		if !defined[m[1]] {
			p.addf(at, "%s refers to $(%s), which is not defined, so the kubelet leaves it unexpanded", field, m[1])
		}
	}
}

func checkConfigMapKeys(p *problems, at string, r *rendered, name string, keys []string) *corev1.ConfigMap {
	cm := r.configMaps[name]
	if cm == nil {
		p.addf(at, "ConfigMap %q is not rendered", name)
		return nil
	}
	for _, k := range keys {
		_, inData := cm.Data[k]
		_, inBinary := cm.BinaryData[k]
		if !inData && !inBinary {
			p.addf(at, "ConfigMap %q has no key %q", name, k)
		}
	}
	return cm
}

func checkSecretKeys(p *problems, at string, secrets secretTemplate, name string, keys []string) {
	have, ok := secrets[name]
	if !ok {
		p.addf(at, "Secret %q is not in secret.example.yaml", name)
		return
	}
	for _, k := range keys {
		if !have[k] {
			p.addf(at, "Secret %q in secret.example.yaml has no key %q", name, k)
		}
	}
}

// checkImage wants a tag or a digest, and not :latest, on every image.
func checkImage(p *problems, at, image string) {
	if _, digest, ok := strings.Cut(image, "@"); ok {
		if !strings.HasPrefix(digest, "sha256:") {
			p.addf(at, "image %q has a malformed digest", image)
		}
		return
	}
	// The tag follows the last ':' after the last '/' (a ':' before it is a
	// registry port).
	last := image[strings.LastIndex(image, "/")+1:]
	_, tag, ok := strings.Cut(last, ":")
	switch {
	case !ok || tag == "":
		p.addf(at, "image %q has no tag", image)
	case tag == "latest":
		p.addf(at, "image %q uses :latest", image)
	}
}

func checkNamedPort(p *problems, at string, c corev1.Container, port intstr.IntOrString) {
	if port.Type != intstr.String {
		return
	}
	if !slices.ContainsFunc(c.Ports, func(cp corev1.ContainerPort) bool { return cp.Name == port.StrVal }) {
		p.addf(at, "probe port %q is not a port of the container", port.StrVal)
	}
}

func checkDeployment(p *problems, where string, r *rendered, d *appsv1.Deployment) {
	if !selects(d.Spec.Selector, d.Spec.Template.Labels) {
		p.addf(where, "spec.selector does not match its pod template labels")
	}
	var hpa bool
	for _, h := range r.hpas {
		ref := h.Spec.ScaleTargetRef
		if ref.APIVersion == "apps/v1" && ref.Kind == "Deployment" && ref.Name == d.Name {
			hpa = true
			if h.Spec.MinReplicas == nil || *h.Spec.MinReplicas < 2 {
				p.addf(where, "HorizontalPodAutoscaler/%s allows fewer than 2 replicas", h.Name)
			}
		}
	}
	if !hpa {
		p.addf(where, "no HorizontalPodAutoscaler targets it")
	} else if d.Spec.Replicas != nil {
		p.addf(where, "sets spec.replicas although an HPA owns the count (every apply would reset it)")
	}
	if !slices.ContainsFunc(r.pdbs, func(b *policyv1.PodDisruptionBudget) bool { return selects(b.Spec.Selector, d.Spec.Template.Labels) }) {
		p.addf(where, "no PodDisruptionBudget selects its pods")
	}
}

func checkStatefulSet(p *problems, where string, r *rendered, s *appsv1.StatefulSet) {
	if !selects(s.Spec.Selector, s.Spec.Template.Labels) {
		p.addf(where, "spec.selector does not match its pod template labels")
	}
	if findService(r, s.Spec.ServiceName) == nil {
		p.addf(where, "serviceName %q is not a rendered Service", s.Spec.ServiceName)
	}
	if s.Spec.Replicas != nil && *s.Spec.Replicas > 1 &&
		!slices.ContainsFunc(r.pdbs, func(b *policyv1.PodDisruptionBudget) bool { return selects(b.Spec.Selector, s.Spec.Template.Labels) }) {
		p.addf(where, "%d replicas and no PodDisruptionBudget selects its pods", *s.Spec.Replicas)
	}
}

// checkPDBs: every budget protects some pods, and no pod has two budgets
// (the eviction API refuses to evict a pod covered by more than one).
func checkPDBs(p *problems, where string, r *rendered) {
	for _, b := range r.pdbs {
		if b.Spec.Selector == nil || len(b.Spec.Selector.MatchLabels)+len(b.Spec.Selector.MatchExpressions) == 0 {
			p.addf(where, "PodDisruptionBudget/%s has an empty selector", b.Name)
		}
		if !slices.ContainsFunc(workloads(r), func(w workload) bool { return selects(b.Spec.Selector, w.pod.Labels) }) {
			p.addf(where, "PodDisruptionBudget/%s selects no pods", b.Name)
		}
	}
	for _, w := range workloads(r) {
		var n int
		for _, b := range r.pdbs {
			if selects(b.Spec.Selector, w.pod.Labels) {
				n++
			}
		}
		if n > 1 {
			p.addf(where, "%s is selected by %d PodDisruptionBudgets", w, n)
		}
	}
}

// checkServices: every Service selects some pods, and its target ports exist.
func checkServices(p *problems, where string, r *rendered) {
	for _, s := range r.services {
		at := where + ": Service/" + s.Name
		var pods []*corev1.PodTemplateSpec
		for _, w := range workloads(r) {
			if !w.isJob && len(s.Spec.Selector) > 0 && labels.SelectorFromSet(s.Spec.Selector).Matches(labels.Set(w.pod.Labels)) {
				pods = append(pods, w.pod)
			}
		}
		if len(pods) == 0 {
			p.addf(at, "selects no pods")
			continue
		}
		for _, sp := range s.Spec.Ports {
			tp := sp.TargetPort
			if tp.Type == intstr.Int && tp.IntVal == 0 {
				tp = intstr.FromInt32(sp.Port) // defaulted to port
			}
			if !slices.ContainsFunc(pods, func(pod *corev1.PodTemplateSpec) bool { return hasPort(pod, tp) }) {
				p.addf(at, "targetPort %s is not a port of the selected pods", tp.String())
			}
		}
	}
}

// checkNetworkPolicies: a policy whose selectors select nothing is a typo
// that either opens nothing (a silent outage) or protects nothing.
func checkNetworkPolicies(p *problems, where string, r *rendered) {
	for _, np := range r.netpols {
		at := where + ": NetworkPolicy/" + np.Name
		sel := np.Spec.PodSelector
		if len(sel.MatchLabels)+len(sel.MatchExpressions) > 0 &&
			!slices.ContainsFunc(workloads(r), func(w workload) bool { return selects(&sel, w.pod.Labels) }) {
			p.addf(at, "podSelector selects no pods")
		}
		for _, rule := range np.Spec.Ingress {
			for _, peer := range rule.From {
				if peer.NamespaceSelector != nil && peer.NamespaceSelector.MatchLabels["kubernetes.io/metadata.name"] == "" &&
					!slices.ContainsFunc(r.namespaces, func(n *corev1.Namespace) bool { return selects(peer.NamespaceSelector, n.Labels) }) {
					p.addf(at, "namespaceSelector %v selects no Berth namespace", peer.NamespaceSelector.MatchLabels)
				}
				if peer.PodSelector != nil &&
					!slices.ContainsFunc(workloads(r), func(w workload) bool { return selects(peer.PodSelector, w.pod.Labels) }) {
					p.addf(at, "from.podSelector selects no pods")
				}
			}
		}
	}
}

// --- small helpers ---

func selects(sel *metav1.LabelSelector, podLabels map[string]string) bool {
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && !s.Empty() && s.Matches(labels.Set(podLabels))
}

func hasPort(pod *corev1.PodTemplateSpec, port intstr.IntOrString) bool {
	for _, c := range pod.Spec.Containers {
		for _, cp := range c.Ports {
			if (port.Type == intstr.String && cp.Name == port.StrVal) || (port.Type == intstr.Int && cp.ContainerPort == port.IntVal) {
				return true
			}
		}
	}
	return false
}

func findService(r *rendered, name string) *corev1.Service {
	for _, s := range r.services {
		if s.Name == name {
			return s
		}
	}
	return nil
}

// findConfigMap finds a generated ConfigMap by its name without the hash suffix.
func findConfigMap(r *rendered, name string) *corev1.ConfigMap {
	for full, cm := range r.configMaps {
		if full == name || (strings.HasPrefix(full, name+"-") && !strings.Contains(full[len(name)+1:], "-")) {
			return cm
		}
	}
	return nil
}

func keysOf(items []corev1.KeyToPath) []string {
	var ks []string
	for _, it := range items {
		ks = append(ks, it.Key)
	}
	return ks
}

func isTrue(b *bool) bool { return b != nil && *b }

func sameSet(a, b []string) bool {
	return slices.Equal(slices.Sorted(slices.Values(a)), slices.Sorted(slices.Values(b)))
}
