package webhook

import (
	"os"
	"reflect"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

func TestShippedYAMLMatchesTheGoConfiguration(t *testing.T) {
	b, err := os.ReadFile("../deploy/webhook/mutatingwebhookconfiguration.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var shipped admissionregistrationv1.MutatingWebhookConfiguration
	if err := yaml.UnmarshalStrict(b, &shipped); err != nil {
		t.Fatalf("YAML does not decode strictly: %v", err)
	}
	built := MutatingWebhookConfiguration(DefaultConfigurationName,
		ServiceClientConfig(DefaultServiceNamespace, DefaultServiceName, nil))
	if !reflect.DeepEqual(&shipped, built) {
		gy, _ := yaml.Marshal(built)
		t.Fatalf("deploy/webhook/mutatingwebhookconfiguration.yaml and MutatingWebhookConfiguration differ.\nYAML:\n%s\nGo:\n%s", b, gy)
	}
}

func TestConfigurationPolicies(t *testing.T) {
	// Written out independently of the builder: these are the promises.
	cfg := MutatingWebhookConfiguration("x", URLClientConfig("https://127.0.0.1:9443"+Path, []byte("ca")))
	if len(cfg.Webhooks) != 2 || cfg.Webhooks[0].Name != "node-status.kube-reclaim.io" || cfg.Webhooks[1].Name != "pods.kube-reclaim.io" {
		t.Fatalf("webhooks %d, want node-status.kube-reclaim.io and pods.kube-reclaim.io", len(cfg.Webhooks))
	}
	w := cfg.Webhooks[0]
	if *w.FailurePolicy != "Ignore" || *w.TimeoutSeconds != 2 || *w.SideEffects != "None" ||
		*w.MatchPolicy != "Equivalent" || *w.ReinvocationPolicy != "IfNeeded" {
		t.Errorf("policies: failure %s timeout %d sideEffects %s match %s reinvocation %s",
			*w.FailurePolicy, *w.TimeoutSeconds, *w.SideEffects, *w.MatchPolicy, *w.ReinvocationPolicy)
	}
	if !reflect.DeepEqual(w.AdmissionReviewVersions, []string{"v1", "v1beta1"}) {
		t.Errorf("admissionReviewVersions %v", w.AdmissionReviewVersions)
	}
	type rule struct{ op, group, version, resource string }
	var got []rule
	for _, r := range w.Rules {
		for _, op := range r.Operations {
			got = append(got, rule{string(op), r.APIGroups[0], r.APIVersions[0], r.Resources[0]})
		}
	}
	want := []rule{{"UPDATE", "", "v1", "nodes/status"}, {"CREATE", "", "v1", "nodes"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rules %v, want %v", got, want)
	}
	if *w.ClientConfig.URL != "https://127.0.0.1:9443/mutate-node-status" || string(w.ClientConfig.CABundle) != "ca" {
		t.Errorf("clientConfig %+v", w.ClientConfig)
	}
}

func TestPodWebhookPolicies(t *testing.T) {
	// Written out independently of the builder: these are the promises.
	cfg := MutatingWebhookConfiguration("x", URLClientConfig("https://127.0.0.1:9443"+Path, []byte("ca")))
	w := cfg.Webhooks[1]
	if *w.FailurePolicy != "Fail" || *w.TimeoutSeconds != 5 || *w.SideEffects != "None" ||
		*w.MatchPolicy != "Equivalent" || *w.ReinvocationPolicy != "IfNeeded" {
		t.Errorf("policies: failure %s timeout %d sideEffects %s match %s reinvocation %s",
			*w.FailurePolicy, *w.TimeoutSeconds, *w.SideEffects, *w.MatchPolicy, *w.ReinvocationPolicy)
	}
	type rule struct{ op, group, version, resource, scope string }
	var got []rule
	for _, r := range w.Rules {
		for _, op := range r.Operations {
			got = append(got, rule{string(op), r.APIGroups[0], r.APIVersions[0], r.Resources[0], string(*r.Scope)})
		}
	}
	// pods/resize: an in-place resize of a reclaimed pod is checked against
	// its grant.
	want := []rule{{"CREATE", "", "v1", "pods", "Namespaced"}, {"UPDATE", "", "v1", "pods/resize", "Namespaced"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("rules %+v, want %+v", got, want)
	}
	if *w.ClientConfig.URL != "https://127.0.0.1:9443/mutate-pod" || string(w.ClientConfig.CABundle) != "ca" {
		t.Errorf("clientConfig %+v", w.ClientConfig)
	}
	if len(w.MatchConditions) != 1 {
		t.Fatalf("%d matchConditions", len(w.MatchConditions))
	}
	e := w.MatchConditions[0].Expression
	for _, s := range []string{`"kube-reclaim.io/reclaimed-cpu" in c.resources.requests`, `"kube-reclaim.io/reclaimed-memory" in c.resources.limits`,
		`object.spec.initContainers.exists(`, `object.metadata.labels["kube-reclaim.io/reclaimed"] == "true"`, `has(object.spec.initContainers)`} {
		if !strings.Contains(e, s) {
			t.Errorf("matchCondition does not contain %s:\n%s", s, e)
		}
	}
	// Another domain names its own resources.
	other := MutatingWebhookConfigurationFor(reclaimable.MustNames("reclaim.example.com"), "x", ServiceClientConfig("ns", "svc", nil))
	if e := other.Webhooks[1].MatchConditions[0].Expression; !strings.Contains(e, `"reclaim.example.com/reclaimed-cpu"`) || strings.Contains(e, "kube-reclaim.io") {
		t.Errorf("matchCondition for reclaim.example.com: %s", e)
	}
	if p := *other.Webhooks[1].ClientConfig.Service.Path; p != PodPath {
		t.Errorf("service path %s, want %s", p, PodPath)
	}
	if p := *other.Webhooks[0].ClientConfig.Service.Path; p != Path {
		t.Errorf("node webhook's service path changed to %s", p)
	}
}
