package policy

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"
)

func TestDefaultSettingsMatchTheDocumentedDefaults(t *testing.T) {
	want := Settings{
		Policy: "usage", Window: 5 * time.Minute, Peak: PeakMax, SampleAlignment: 10 * time.Second,
		ChangeThreshold: 0.1,
		CPU:             ResourceSettings{Margin: 0.35, MaxRatio: 1, Minimum: 100},
		Memory:          ResourceSettings{Margin: 0.35, MaxRatio: 1, Minimum: 134217728},
	}
	if got := Default().Default; !reflect.DeepEqual(got, want) {
		t.Errorf("Default() = %+v, want %+v", got, want)
	}
	if len(Default().Pools) != 0 {
		t.Errorf("Default() has pools")
	}
	if err := want.Validate("default"); err != nil {
		t.Errorf("the defaults do not validate: %v", err)
	}
}

func TestLoadExampleFile(t *testing.T) {
	data, err := os.ReadFile("testdata/example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(data)
	if err != nil {
		t.Fatalf("the example does not load: %v", err)
	}
	def := Default().Default
	if !reflect.DeepEqual(cfg.Default, def) {
		t.Errorf("the example's default block should spell out the built-in defaults: got %+v", cfg.Default)
	}
	latency := def
	latency.Policy = PolicyRequest
	latency.CPU.MaxRatio = 0.5
	batch := def
	batch.Peak = 95000
	batch.CPU.Margin = 0.2
	batch.Memory.Margin = 0.25
	want := []Pool{
		{Name: "latency", NodeSelector: map[string]string{"kube-reclaim.io/pool": "latency"}, Settings: latency},
		{Name: "batch", NodeSelector: map[string]string{"node-restriction.kubernetes.io/kube-reclaim-pool": "batch"}, Settings: batch},
	}
	if !reflect.DeepEqual(cfg.Pools, want) {
		t.Errorf("pools = %+v\nwant %+v", cfg.Pools, want)
	}
	if len(cfg.Profiles) != 2 || cfg.Profiles[0].Name != "data-batch" || cfg.Profiles[0].PriorityClassName != "batch-low" ||
		cfg.Profiles[1].Name != "default" {
		t.Errorf("profiles = %+v", cfg.Profiles)
	}
	if p := cfg.Profile(map[string]string{"team": "data"}, map[string]string{"app": "flink"}); p == nil || p.Name != "data-batch" {
		t.Errorf("a flink pod of team data should get data-batch, got %+v", p)
	}
	if cfg.MaxWindow() != 5*time.Minute {
		t.Errorf("MaxWindow = %s", cfg.MaxWindow())
	}
	if w := cfg.Warnings(); len(w) != 0 {
		t.Errorf("the example selects pools by labels nodes can set: %q", w)
	}
}

func TestWarningsNameEveryPoolKeyANodeCanSetItself(t *testing.T) {
	tests := []struct {
		name string
		file string
		want []string // each warning's pool and key, in order
	}{
		{"node-restriction prefix", "pools:\n- {name: a, nodeSelector: {node-restriction.kubernetes.io/pool: a}}\n", nil},
		{"kube-reclaim.io prefix", "pools:\n- {name: a, nodeSelector: {kube-reclaim.io/pool: a}}\n", nil},
		{"no pools", "default: {policy: request}\n", nil},
		{"an ordinary label", "pools:\n- {name: a, nodeSelector: {pool: a}}\n", []string{`pools[0] ("a"): nodeSelector key "pool"`}},
		{"a well-known label kubelets set", "pools:\n- {name: big, nodeSelector: {node.kubernetes.io/instance-type: m6i}}\n",
			[]string{`pools[0] ("big"): nodeSelector key "node.kubernetes.io/instance-type"`}},
		{"a look-alike prefix", "pools:\n- {name: a, nodeSelector: {x.kube-reclaim.io/pool: a}}\n",
			[]string{`pools[0] ("a"): nodeSelector key "x.kube-reclaim.io/pool"`}},
		{"every unsafe key of every pool, safe ones left out",
			"pools:\n- {name: a, nodeSelector: {zone: a, kube-reclaim.io/pool: a, tier: gold}}\n- {name: b, nodeSelector: {role: b}}\n",
			[]string{`pools[0] ("a"): nodeSelector key "tier"`, `pools[0] ("a"): nodeSelector key "zone"`, `pools[1] ("b"): nodeSelector key "role"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := Load([]byte(tt.file))
			if err != nil {
				t.Fatalf("a file with warnings must still load: %v", err)
			}
			got := cfg.Warnings()
			if len(got) != len(tt.want) {
				t.Fatalf("warnings %q, want %d", got, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(got[i], w+" is a label the node's own kubelet can set") ||
					!strings.Contains(got[i], "node-restriction.kubernetes.io/ or kube-reclaim.io/") {
					t.Errorf("warning %d = %q, want it to start with %q and name the safe prefixes", i, got[i], w)
				}
			}
		})
	}
}

func TestConfigFor(t *testing.T) {
	cfg, err := Load([]byte(`
default:
  cpu: {margin: 0.5}
pools:
- name: first
  nodeSelector: {zone: a, tier: gold}
  cpu: {margin: 0.1}
- name: second
  nodeSelector: {zone: a}
  cpu: {margin: 0.2}
- name: empty-value
  nodeSelector: {flag: ""}
  cpu: {margin: 0.3}
`))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name       string
		labels     map[string]string
		wantPool   string
		wantMargin float64
	}{
		{"a node matching no pool gets the default block", map[string]string{"zone": "b"}, "", 0.5},
		{"a node without labels gets the default block", nil, "", 0.5},
		{"a node matching two pools gets the first one", map[string]string{"zone": "a", "tier": "gold", "x": "y"}, "first", 0.1},
		{"a node matching only part of a selector skips that pool", map[string]string{"zone": "a", "tier": "silver"}, "second", 0.2},
		{"a label with the wrong value does not match", map[string]string{"zone": "A"}, "", 0.5},
		{"a selector value may be empty and must then be present and empty", map[string]string{"flag": ""}, "empty-value", 0.3},
		{"a missing label does not match an empty selector value", map[string]string{"other": ""}, "", 0.5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s, pool := cfg.For(tc.labels)
			if pool != tc.wantPool || s.CPU.Margin != tc.wantMargin {
				t.Errorf("For = pool %q margin %v, want pool %q margin %v", pool, s.CPU.Margin, tc.wantPool, tc.wantMargin)
			}
			// Everything not overridden comes from the built-in defaults.
			if s.Memory.Margin != 0.35 || s.Window != 5*time.Minute || s.Policy != PolicyUsage {
				t.Errorf("inherited fields wrong: %+v", s)
			}
		})
	}
}

func TestLoadOverridesLayer(t *testing.T) {
	cfg, err := Load([]byte(`
default:
  policy: max-usage-request
  window: 10m
  peak: p99
  sampleAlignment: 5s
  changeThreshold: 0.2
  memory: {minimum: 1e9, maxRatio: 0.8}
pools:
- name: p
  nodeSelector: {a: b}
  window: 20m
  memory: {margin: 0}
`))
	if err != nil {
		t.Fatal(err)
	}
	def := Settings{
		Policy: PolicyMaxUsageRequest, Window: 10 * time.Minute, Peak: 99000, SampleAlignment: 5 * time.Second,
		ChangeThreshold: 0.2,
		CPU:             ResourceSettings{Margin: 0.35, MaxRatio: 1, Minimum: 100},
		Memory:          ResourceSettings{Margin: 0.35, MaxRatio: 0.8, Minimum: 1000000000},
	}
	if !reflect.DeepEqual(cfg.Default, def) {
		t.Errorf("default = %+v\nwant %+v", cfg.Default, def)
	}
	pool := def
	pool.Window = 20 * time.Minute
	pool.Memory.Margin = 0
	if !reflect.DeepEqual(cfg.Pools[0].Settings, pool) {
		t.Errorf("pool = %+v\nwant %+v", cfg.Pools[0].Settings, pool)
	}
	if cfg.MaxWindow() != 20*time.Minute {
		t.Errorf("MaxWindow = %s, want the pool's 20m", cfg.MaxWindow())
	}
}

func TestLoadEmptyDocumentsGiveTheDefaults(t *testing.T) {
	for name, doc := range map[string]string{
		"an empty file gives the defaults":                     "",
		"a file of comments gives the defaults":                "# nothing\n",
		"an explicit null gives the defaults":                  "null",
		"empty default and pools blocks give the defaults":     "default:\npools:\n",
		"an empty default mapping and empty pool list as well": "default: {}\npools: []\n",
	} {
		t.Run(name, func(t *testing.T) {
			cfg, err := Load([]byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(cfg, Default()) {
				t.Errorf("got %+v", cfg)
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	cases := []struct {
		name string
		doc  string
		want []string
	}{
		{"a margin of 1.5 in a pool is out of range", `
pools:
- name: a
  nodeSelector: {k: v}
- name: b
  nodeSelector: {k: w}
  cpu: {margin: 1.5}
`, []string{"pools[1].cpu.margin: must be in [0,1), got 1.5"}},
		{"a margin of one would reclaim nothing and is rejected", "default: {memory: {margin: 1}}",
			[]string{"default.memory.margin: must be in [0,1), got 1"}},
		{"a negative margin is rejected", "default: {cpu: {margin: -0.1}}",
			[]string{"default.cpu.margin: must be in [0,1), got -0.1"}},
		{"a margin written as a percentage string is rejected", `default: {cpu: {margin: "35%"}}`,
			[]string{`default.cpu.margin: must be a number, got string "35%"`}},
		{"a max ratio above one is rejected", "default: {cpu: {maxRatio: 1.2}}",
			[]string{"default.cpu.maxRatio: must be in [0,1], got 1.2"}},
		{"a negative minimum is rejected", "default: {memory: {minimum: -1}}",
			[]string{"default.memory.minimum: must be >= 0, got -1"}},
		{"a fractional minimum is rejected", "default: {cpu: {minimum: 1.5}}",
			[]string{"default.cpu.minimum: must be an integer, got 1.5"}},
		{"a quantity string minimum is rejected", `default: {memory: {minimum: 1Gi}}`,
			[]string{`default.memory.minimum: must be an integer, got string "1Gi"`}},
		{"an unknown policy is rejected", "default: {policy: magic}",
			[]string{`default.policy: unknown policy "magic" (want usage, request or max-usage-request)`}},
		{"an empty policy is rejected", `default: {policy: ""}`,
			[]string{`default.policy: unknown policy "" (want usage, request or max-usage-request)`}},
		{"a policy that is not a string is rejected", "default: {policy: 3}",
			[]string{"default.policy: must be a string, got number 3"}},
		{"a percentile of zero is rejected", "default: {peak: p0}",
			[]string{`default.peak: want "max" or a percentile such as "p95" or "p99.9" (0 < N <= 100, at most 3 decimals), got "p0"`}},
		{"a percentile above 100 is rejected", "pools: [{name: a, nodeSelector: {k: v}, peak: p101}]",
			[]string{`pools[0].peak: want "max" or a percentile such as "p95" or "p99.9" (0 < N <= 100, at most 3 decimals), got "p101"`}},
		{"a percentile without the p is rejected", "default: {peak: 95}",
			[]string{"default.peak: must be a string, got number 95"}},
		{"a percentile with too many decimals is rejected", "default: {peak: p99.9999}",
			[]string{`default.peak: want "max" or a percentile such as "p95" or "p99.9" (0 < N <= 100, at most 3 decimals), got "p99.9999"`}},
		{"a window that is not a duration is rejected", "default: {window: 5 minutes}",
			[]string{`default.window: must be a duration string such as "5m", got "5 minutes"`}},
		{"a window given as a number is rejected", "default: {window: 300}",
			[]string{`default.window: must be a duration string such as "5m", got number 300`}},
		{"a zero window is rejected", "default: {window: 0s}",
			[]string{"default.window: must be in (0s, 1h0m0s], got 0s"}},
		{"a window above an hour is rejected", "default: {window: 2h}",
			[]string{"default.window: must be in (0s, 1h0m0s], got 2h0m0s"}},
		{"a zero sample alignment is rejected", "default: {sampleAlignment: 0s}",
			[]string{"default.sampleAlignment: must be in (0s, 1m0s], got 0s"}},
		{"a change threshold above one is rejected", "default: {changeThreshold: 2}",
			[]string{"default.changeThreshold: must be in [0,1], got 2"}},
		{"an unknown top-level field is rejected", "defaults: {}",
			[]string{"defaults: unknown field (known: default, pools, profiles)"}},
		{"an unknown settings field is rejected", "default: {margin: 0.3}",
			[]string{"default.margin: unknown field (known: policy, window, peak, sampleAlignment, changeThreshold, cpu, memory)"}},
		{"an unknown resource field is rejected", "pools: [{name: a, nodeSelector: {k: v}, cpu: {margn: 0.3}}]",
			[]string{"pools[0].cpu.margn: unknown field (known: margin, maxRatio, minimum)"}},
		{"an unknown pool field is rejected", "pools: [{name: a, nodeSelector: {k: v}, selector: {k: v}}]",
			[]string{"pools[0].selector: unknown field (known: name, nodeSelector, policy, window, peak, sampleAlignment, changeThreshold, cpu, memory)"}},
		{"name and nodeSelector are not settings of the default block", "default: {name: x, nodeSelector: {a: b}}",
			[]string{
				"default.name: unknown field (known: policy, window, peak, sampleAlignment, changeThreshold, cpu, memory)",
				"default.nodeSelector: unknown field (known: policy, window, peak, sampleAlignment, changeThreshold, cpu, memory)",
			}},
		{"duplicate pool names are rejected", `
pools:
- {name: gpu, nodeSelector: {a: b}}
- {name: cpu, nodeSelector: {a: c}}
- {name: gpu, nodeSelector: {a: d}}
`, []string{`pools[2].name: duplicate pool name "gpu" (also pools[0])`}},
		{"a pool without a name is rejected", "pools: [{nodeSelector: {a: b}}]",
			[]string{"pools[0].name: must not be empty"}},
		{"a pool with an empty name is rejected", `pools: [{name: "", nodeSelector: {a: b}}]`,
			[]string{"pools[0].name: must not be empty"}},
		{"a pool name that is not a string is rejected", "pools: [{name: [a], nodeSelector: {a: b}}]",
			[]string{"pools[0].name: must be a string, got a list"}},
		{"a pool without a selector is rejected", "pools: [{name: a}]",
			[]string{"pools[0].nodeSelector: must not be empty: a pool needs at least one label to select its nodes"}},
		{"a pool with an empty selector is rejected", "pools: [{name: a, nodeSelector: {}}]",
			[]string{"pools[0].nodeSelector: must not be empty: a pool needs at least one label to select its nodes"}},
		{"a selector that is a list is rejected", "pools: [{name: a, nodeSelector: [a]}]",
			[]string{"pools[0].nodeSelector: must be a mapping, got a list"}},
		{"a selector value that is not a string is rejected", "pools: [{name: a, nodeSelector: {zone: 1, enabled: yes}}]",
			[]string{
				`pools[0].nodeSelector["enabled"]: label value must be a string (quote it), got boolean true`,
				`pools[0].nodeSelector["zone"]: label value must be a string (quote it), got number 1`,
			}},
		{"an unquoted y is a YAML 1.1 boolean and must be quoted", "pools: [{name: a, nodeSelector: {x: y}}]",
			[]string{`pools[0].nodeSelector["x"]: label value must be a string (quote it), got boolean true`}},
		{"an empty selector key is rejected", `pools: [{name: a, nodeSelector: {"": b}}]`,
			[]string{`pools[0].nodeSelector[""]: label key must not be empty`}},
		{"pools that are not a list are rejected", "pools: {name: a}",
			[]string{"pools: must be a list, got a mapping"}},
		{"a pool that is not a mapping is rejected", "pools: [a]",
			[]string{`pools[0]: must be a mapping, got string "a"`}},
		{"a default block that is not a mapping is rejected", "default: 3",
			[]string{"default: must be a mapping, got number 3"}},
		{"a resource block that is not a mapping is rejected", "default: {cpu: 0.3}",
			[]string{"default.cpu: must be a mapping, got number 0.3"}},
		{"a document that is a list is rejected", "- a",
			[]string{"must be a mapping with keys default, pools and profiles, got a list"}},
		{"a document that is a scalar is rejected", "hello",
			[]string{`must be a mapping with keys default, pools and profiles, got string "hello"`}},
		{"every error is reported at once, each with its path", `
default:
  policy: fast
  window: -1m
  peak: p0
  cpu: {margin: 1.5, maxRatio: -1, minimum: -5}
  typo: 1
pools:
- name: a
  nodeSelector: {}
  memory: {minimum: -1}
- name: a
  nodeSelector: {k: v}
  cpu: {margin: 1.5}
- name: b
`, []string{
			"default.typo: unknown field (known: policy, window, peak, sampleAlignment, changeThreshold, cpu, memory)",
			`default.policy: unknown policy "fast" (want usage, request or max-usage-request)`,
			"default.window: must be in (0s, 1h0m0s], got -1m0s",
			`default.peak: want "max" or a percentile such as "p95" or "p99.9" (0 < N <= 100, at most 3 decimals), got "p0"`,
			"default.cpu.margin: must be in [0,1), got 1.5",
			"default.cpu.maxRatio: must be in [0,1], got -1",
			"default.cpu.minimum: must be >= 0, got -5",
			"pools[0].nodeSelector: must not be empty: a pool needs at least one label to select its nodes",
			"pools[0].memory.minimum: must be >= 0, got -1",
			`pools[1].name: duplicate pool name "a" (also pools[0])`,
			"pools[1].cpu.margin: must be in [0,1), got 1.5",
			"pools[2].nodeSelector: must not be empty: a pool needs at least one label to select its nodes",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Load([]byte(tc.doc))
			if err == nil {
				t.Fatalf("Load succeeded: %+v", cfg)
			}
			if cfg != nil {
				t.Errorf("Load returned a config with an error")
			}
			got := strings.Split(err.Error(), "\n")
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("errors:\n%s\nwant:\n%s", err, strings.Join(tc.want, "\n"))
			}
			// Every line is a *FieldError reachable through errors.As on the joined error.
			var fe *FieldError
			if !errors.As(err, &fe) {
				t.Errorf("error is not a *FieldError: %T", err)
			}
		})
	}
}

func TestLoadRejectsBrokenYAML(t *testing.T) {
	for name, doc := range map[string]string{
		"unbalanced brackets are not YAML":               "default: [",
		"a duplicate key is rejected by strict decoding": "default: {}\ndefault: {}\n",
		"tabs for indentation are not YAML":              "default:\n\tpolicy: usage\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, err := Load([]byte(doc))
			if err == nil || !strings.HasPrefix(err.Error(), "not valid YAML: ") {
				t.Errorf("got %v, want a YAML error", err)
			}
		})
	}
}

func TestSettingsValidate(t *testing.T) {
	bad := Settings{Policy: "x", Window: 0, SampleAlignment: 0, ChangeThreshold: -1,
		CPU: ResourceSettings{Margin: 1, MaxRatio: 2, Minimum: -1}, Memory: ResourceSettings{Margin: 0.5, MaxRatio: 0.5}}
	err := bad.Validate("s")
	want := []string{
		`s.policy: unknown policy "x" (want usage, request or max-usage-request)`,
		"s.window: must be in (0s, 1h0m0s], got 0s",
		"s.sampleAlignment: must be in (0s, 1m0s], got 0s",
		"s.changeThreshold: must be in [0,1], got -1",
		"s.cpu.margin: must be in [0,1), got 1",
		"s.cpu.maxRatio: must be in [0,1], got 2",
		"s.cpu.minimum: must be >= 0, got -1",
	}
	if err == nil || !reflect.DeepEqual(strings.Split(err.Error(), "\n"), want) {
		t.Errorf("Validate:\n%v\nwant:\n%s", err, strings.Join(want, "\n"))
	}
}
