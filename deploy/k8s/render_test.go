package k8s_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	kjson "sigs.k8s.io/json"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// kinds maps "apiVersion/kind" to the typed struct a manifest must decode
// into. A kind that is not listed fails validation: adding one is a
// deliberate act, together with whatever checks it needs.
var kinds = map[string]func() any{
	"v1/Namespace":                           func() any { return new(corev1.Namespace) },
	"v1/ConfigMap":                           func() any { return new(corev1.ConfigMap) },
	"v1/Secret":                              func() any { return new(corev1.Secret) },
	"v1/Service":                             func() any { return new(corev1.Service) },
	"apps/v1/Deployment":                     func() any { return new(appsv1.Deployment) },
	"apps/v1/StatefulSet":                    func() any { return new(appsv1.StatefulSet) },
	"batch/v1/Job":                           func() any { return new(batchv1.Job) },
	"autoscaling/v2/HorizontalPodAutoscaler": func() any { return new(autoscalingv2.HorizontalPodAutoscaler) },
	"policy/v1/PodDisruptionBudget":          func() any { return new(policyv1.PodDisruptionBudget) },
	"networking.k8s.io/v1/NetworkPolicy":     func() any { return new(networkingv1.NetworkPolicy) },
}

// decodeStrict decodes one YAML document into its typed Kubernetes struct the
// way the API server does with fieldValidation=Strict: unknown, duplicate and
// wrongly-cased fields are errors. Case matters: encoding/json (and so
// sigs.k8s.io/yaml.UnmarshalStrict) matches field names case-insensitively and
// would accept `ReadinessProbe:`, which the API server silently drops.
func decodeStrict(doc []byte) (metav1.Object, error) {
	j, err := yaml.YAMLToJSONStrict(doc) // also rejects duplicate YAML keys
	if err != nil {
		return nil, err
	}
	var tm metav1.TypeMeta
	if err := json.Unmarshal(j, &tm); err != nil {
		return nil, err
	}
	newObj, ok := kinds[tm.APIVersion+"/"+tm.Kind]
	if !ok {
		return nil, fmt.Errorf("unknown kind %q (apiVersion %q): not in the kinds table of render_test.go", tm.Kind, tm.APIVersion)
	}
	obj := newObj()
	strictErrs, err := kjson.UnmarshalStrict(j, obj)
	if err != nil {
		return nil, err
	}
	if len(strictErrs) > 0 {
		return nil, errors.Join(strictErrs...)
	}
	return obj.(metav1.Object), nil
}

// rendered is everything one overlay renders to, indexed by kind.
type rendered struct {
	region string // the overlay directory's name
	docs   [][]byte
	all    []kindObject

	namespaces   []*corev1.Namespace
	configMaps   map[string]*corev1.ConfigMap
	secrets      []*corev1.Secret
	services     []*corev1.Service
	deployments  []*appsv1.Deployment
	statefulSets []*appsv1.StatefulSet
	jobs         []*batchv1.Job
	hpas         []*autoscalingv2.HorizontalPodAutoscaler
	pdbs         []*policyv1.PodDisruptionBudget
	netpols      []*networkingv1.NetworkPolicy
}

type kindObject struct {
	kind string
	obj  metav1.Object
}

func (k kindObject) String() string { return k.kind + "/" + k.obj.GetName() }

func (r *rendered) add(obj metav1.Object) {
	var kind string
	switch o := obj.(type) {
	case *corev1.Namespace:
		kind, r.namespaces = "Namespace", append(r.namespaces, o)
	case *corev1.ConfigMap:
		kind, r.configMaps[o.Name] = "ConfigMap", o
	case *corev1.Secret:
		kind, r.secrets = "Secret", append(r.secrets, o)
	case *corev1.Service:
		kind, r.services = "Service", append(r.services, o)
	case *appsv1.Deployment:
		kind, r.deployments = "Deployment", append(r.deployments, o)
	case *appsv1.StatefulSet:
		kind, r.statefulSets = "StatefulSet", append(r.statefulSets, o)
	case *batchv1.Job:
		kind, r.jobs = "Job", append(r.jobs, o)
	case *autoscalingv2.HorizontalPodAutoscaler:
		kind, r.hpas = "HorizontalPodAutoscaler", append(r.hpas, o)
	case *policyv1.PodDisruptionBudget:
		kind, r.pdbs = "PodDisruptionBudget", append(r.pdbs, o)
	case *networkingv1.NetworkPolicy:
		kind, r.netpols = "NetworkPolicy", append(r.netpols, o)
	default:
		panic(fmt.Sprintf("kinds lists %T but rendered.add does not", obj))
	}
	r.all = append(r.all, kindObject{kind, obj})
}

// render builds one kustomization directory with the kustomize API, exactly
// as `kustomize build dir` would, and decodes every object strictly. Objects
// that decode are returned even when others fail, so that one typo does not
// hide every other finding.
func render(dir string) (*rendered, error) {
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		return nil, fmt.Errorf("kustomize build: %w", err)
	}
	r := &rendered{configMaps: map[string]*corev1.ConfigMap{}}
	var errs []error
	for _, res := range m.Resources() {
		doc, err := res.AsYAML()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s/%s: %w", res.GetKind(), res.GetName(), err))
			continue
		}
		obj, err := decodeStrict(doc)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s/%s: %w", res.GetKind(), res.GetName(), err))
			continue
		}
		r.add(obj)
		r.docs = append(r.docs, doc)
	}
	return r, errors.Join(errs...)
}

// secretTemplate maps each Secret of secret.example.yaml to its keys.
type secretTemplate map[string]map[string]bool

// readSecretTemplate strictly decodes the multi-document secret.example.yaml.
func readSecretTemplate(path string) (secretTemplate, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tmpl := secretTemplate{}
	rd := utilyaml.NewYAMLReader(bufio.NewReader(f))
	for {
		doc, err := rd.Read()
		if errors.Is(err, io.EOF) {
			return tmpl, nil
		}
		if err != nil {
			return nil, err
		}
		if j, _ := yaml.YAMLToJSON(doc); len(bytes.TrimSpace(j)) == 0 || string(bytes.TrimSpace(j)) == "null" {
			continue // a document holding only comments
		}
		obj, err := decodeStrict(doc)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		s, ok := obj.(*corev1.Secret)
		if !ok {
			return nil, fmt.Errorf("%s: %s is not a Secret", path, obj.GetName())
		}
		keys := map[string]bool{}
		for k := range s.Data {
			keys[k] = true
		}
		for k := range s.StringData {
			keys[k] = true
		}
		tmpl[s.Name] = keys
	}
}
