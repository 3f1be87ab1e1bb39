package webhook

import (
	"os"
	"reflect"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"sigs.k8s.io/yaml"
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
	if len(cfg.Webhooks) != 1 {
		t.Fatalf("%d webhooks", len(cfg.Webhooks))
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
