package policy

import (
	"os"
	"testing"
)

// FuzzLoad: any bytes either load into a configuration whose every block
// validates, or are refused with an error; nothing panics. The publisher and
// the webhook load whatever the ConfigMap holds, and a reload runs inside
// them.
func FuzzLoad(f *testing.F) {
	example, err := os.ReadFile("testdata/example.yaml")
	if err != nil {
		f.Fatal(err)
	}
	for _, seed := range []string{
		string(example),
		"",
		"default: {policy: request, cpu: {margin: 0.2}}\n",
		"pools:\n- {name: a, nodeSelector: {pool: a}, peak: p99.9, window: 1h}\n",
		"pools:\n- {name: a, nodeSelector: {}}\n- {name: a}\n",
		"default: {window: -1s, peak: p0, cpu: {margin: 1, maxRatio: 2, minimum: -1}}\n",
		"profiles:\n- {name: p, podSelector: {matchExpressions: [{key: app, operator: In, values: [x]}]}}\n",
		"[1, 2]\n",
		"default: &a {policy: *a}\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, err := Load(data)
		if err != nil {
			if cfg != nil {
				t.Fatalf("Load returned a configuration with the error %v", err)
			}
			return
		}
		if cfg == nil {
			t.Fatal("Load returned neither a configuration nor an error")
		}
		if err := cfg.Default.Validate("default"); err != nil {
			t.Fatalf("a loaded default block does not validate: %v", err)
		}
		names := map[string]bool{}
		for i := range cfg.Pools {
			p := &cfg.Pools[i]
			if err := p.Settings.Validate(p.Name); err != nil {
				t.Fatalf("loaded pool %q does not validate: %v", p.Name, err)
			}
			if p.Name == "" || names[p.Name] || len(p.NodeSelector) == 0 {
				t.Fatalf("loaded pool %d: name %q (seen before: %v), selector %v", i, p.Name, names[p.Name], p.NodeSelector)
			}
			names[p.Name] = true
			if s, pool := cfg.For(p.NodeSelector); pool == "" || s.Validate(pool) != nil {
				t.Fatalf("a node labelled with pool %q's own selector gets pool %q", p.Name, pool)
			}
		}
		if w := cfg.MaxWindow(); w <= 0 || w > MaxWindow {
			t.Fatalf("MaxWindow %s", w)
		}
		_ = cfg.Warnings()
		_ = cfg.Profile(map[string]string{"team": "data"}, map[string]string{"app": "spark"})
	})
}
