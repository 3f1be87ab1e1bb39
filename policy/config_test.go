package policy

import (
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
		Eviction: EvictionSettings{MemoryPressure: MemoryPressure{EvictAbove: 0.90, EvictUntilBelow: 0.85},
			CPUStarvation: CPUStarvation{Enabled: false, NodeAbove: 0.90, PodBelow: 0.50, Window: 30 * time.Minute}},
	}
	if got := Default().Default; !reflect.DeepEqual(got, want) {
		t.Errorf("Default() = %+v, want %+v", got, want)
	}
	if len(Default().Pools) != 0 {
		t.Errorf("Default() has pools")
	}
}

func TestNodeSettablePoolKeysNameEveryPoolKeyANodeCanSetItself(t *testing.T) {
	pool := func(name string, selector map[string]string) Pool {
		return Pool{Name: name, NodeSelector: selector, Settings: DefaultSettings()}
	}
	tests := []struct {
		name  string
		pools []Pool
		want  []string // each sentence's pool and key, in order
	}{
		{"node-restriction prefix", []Pool{pool("a", map[string]string{"node-restriction.kubernetes.io/pool": "a"})}, nil},
		{"a subdomain of node-restriction", []Pool{pool("a", map[string]string{"team.node-restriction.kubernetes.io/pool": "a"})}, nil},
		{"the domain's prefix", []Pool{pool("a", map[string]string{"kube-reclaim.io/pool": "a"})}, nil},
		{"a kubernetes.io label kubelets may not set", []Pool{pool("a", map[string]string{"node-role.kubernetes.io/batch": ""})}, nil},
		{"a k8s.io label kubelets may not set", []Pool{pool("a", map[string]string{"example.k8s.io/pool": "a"})}, nil},
		{"no pools", nil, nil},
		{"an ordinary label", []Pool{pool("a", map[string]string{"pool": "a"})}, []string{`pools[0] ("a"): nodeSelector key "pool"`}},
		{"a prefixed label of another domain", []Pool{pool("a", map[string]string{"example.com/pool": "a"})},
			[]string{`pools[0] ("a"): nodeSelector key "example.com/pool"`}},
		{"a well-known label kubelets set", []Pool{pool("big", map[string]string{"node.kubernetes.io/instance-type": "m6i"})},
			[]string{`pools[0] ("big"): nodeSelector key "node.kubernetes.io/instance-type"`}},
		{"the hostname", []Pool{pool("one", map[string]string{"kubernetes.io/hostname": "n1"})},
			[]string{`pools[0] ("one"): nodeSelector key "kubernetes.io/hostname"`}},
		{"a kubelet.kubernetes.io subdomain", []Pool{pool("a", map[string]string{"x.kubelet.kubernetes.io/pool": "a"})},
			[]string{`pools[0] ("a"): nodeSelector key "x.kubelet.kubernetes.io/pool"`}},
		{"a look-alike prefix", []Pool{pool("a", map[string]string{"x.kube-reclaim.io/pool": "a"})},
			[]string{`pools[0] ("a"): nodeSelector key "x.kube-reclaim.io/pool"`}},
		{"every unsafe key of every pool, safe ones left out",
			[]Pool{pool("a", map[string]string{"zone": "a", "kube-reclaim.io/pool": "a", "tier": "gold"}), pool("b", map[string]string{"role": "b"})},
			[]string{`pools[0] ("a"): nodeSelector key "tier"`, `pools[0] ("a"): nodeSelector key "zone"`, `pools[1] ("b"): nodeSelector key "role"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := &Config{Default: DefaultSettings(), Pools: tt.pools}
			got := cfg.NodeSettablePoolKeys("kube-reclaim.io")
			if len(got) != len(tt.want) {
				t.Fatalf("sentences %q, want %d", got, len(tt.want))
			}
			for i, w := range tt.want {
				if !strings.HasPrefix(got[i], w+" is a label the node's own kubelet can set") ||
					!strings.Contains(got[i], "kube-reclaim.io/ or node-restriction.kubernetes.io/") {
					t.Errorf("sentence %d = %q, want it to start with %q and name the safe prefixes", i, got[i], w)
				}
			}
		})
	}
}

func TestNodeSettableLabelFollowsTheResourceDomain(t *testing.T) {
	if NodeSettableLabel("example.org/pool", "example.org") {
		t.Error("example.org/pool is settable by a node with --resource-domain=example.org")
	}
	// Positive control: the default domain's keys are then a node's.
	if !NodeSettableLabel("kube-reclaim.io/pool", "example.org") {
		t.Error("kube-reclaim.io/pool is guarded with --resource-domain=example.org")
	}
}

func TestConfigFor(t *testing.T) {
	withMargin := func(m float64) Settings {
		s := DefaultSettings()
		s.CPU.Margin = m
		return s
	}
	cfg := &Config{Default: withMargin(0.5), Pools: []Pool{
		{Name: "first", NodeSelector: map[string]string{"zone": "a", "tier": "gold"}, Settings: withMargin(0.1)},
		{Name: "second", NodeSelector: map[string]string{"zone": "a"}, Settings: withMargin(0.2)},
		{Name: "empty-value", NodeSelector: map[string]string{"flag": ""}, Settings: withMargin(0.3)},
		{Name: "empty-selector", Settings: withMargin(0.4)},
	}}
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
		{"an empty selector matches no node", map[string]string{"zone": "b"}, "", 0.5},
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

func TestMaxWindowIsTheLongestOfDefaultAndPools(t *testing.T) {
	long := DefaultSettings()
	long.Window = 20 * time.Minute
	cfg := &Config{Default: DefaultSettings(), Pools: []Pool{{Name: "p", NodeSelector: map[string]string{"a": "b"}, Settings: long}}}
	if cfg.MaxWindow() != 20*time.Minute {
		t.Errorf("MaxWindow = %s, want the pool's 20m", cfg.MaxWindow())
	}
	// Positive control: without the pool, the default's window.
	if w := Default().MaxWindow(); w != DefaultWindow {
		t.Errorf("MaxWindow of the defaults = %s, want %s", w, DefaultWindow)
	}
}
