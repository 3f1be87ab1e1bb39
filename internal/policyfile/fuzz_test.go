package policyfile

import (
	"os"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kube-reclaim/kube-reclaim/apis/policy/v1alpha1"
	"github.com/kube-reclaim/kube-reclaim/policy"
)

// FuzzParse: any bytes either load into a configuration whose every block
// the file would accept, or are refused with an error; nothing panics. The
// publisher and the webhook load whatever the ConfigMap holds, and a reload
// runs inside them.
func FuzzParse(f *testing.F) {
	example, err := os.ReadFile("../../apis/policy/v1alpha1/testdata/example.yaml")
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		string(example),
		"",
		"default: {policy: request, cpu: {margin: 0.2}}\n",
		versioned + "pools:\n- {name: a, nodeSelector: {pool: a}, peak: p99.9, window: 1h}\n",
		"pools:\n- {name: a, nodeSelector: {}}\n- {name: a}\n",
		"default: {window: -1s, peak: p0, cpu: {margin: 1, maxRatio: 2, minimum: -1}}\n",
		"profiles:\n- {name: p, podSelector: {matchExpressions: [{key: app, operator: In, values: [x]}]}}\n",
		"[1, 2]\n",
		"default: &a {policy: *a}\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, _, err := Parse(data)
		if err != nil {
			if cfg != nil {
				t.Fatalf("Parse returned a configuration with the error %v", err)
			}
			return
		}
		if cfg == nil {
			t.Fatal("Parse returned neither a configuration nor an error")
		}
		if errs := v1alpha1.ValidateSettings(cfg.Default, field.NewPath("default")); len(errs) > 0 {
			t.Fatalf("a loaded default block does not validate: %v", errs)
		}
		names := map[string]bool{}
		for i := range cfg.Pools {
			p := &cfg.Pools[i]
			if errs := v1alpha1.ValidateSettings(p.Settings, field.NewPath(p.Name)); len(errs) > 0 {
				t.Fatalf("loaded pool %q does not validate: %v", p.Name, errs)
			}
			if p.Name == "" || names[p.Name] || len(p.NodeSelector) == 0 {
				t.Fatalf("loaded pool %d: name %q (seen before: %v), selector %v", i, p.Name, names[p.Name], p.NodeSelector)
			}
			names[p.Name] = true
			if _, pool := cfg.For(p.NodeSelector); pool == "" {
				t.Fatalf("a node labelled with pool %q's own selector gets no pool", p.Name)
			}
		}
		if w := cfg.MaxWindow(); w <= 0 || w > policy.MaxWindow {
			t.Fatalf("MaxWindow %s", w)
		}
		_ = cfg.NodeSettablePoolKeys("kube-reclaim.io")
		_ = cfg.Profile(map[string]string{"team": "data"}, map[string]string{"app": "spark"})
	})
}
