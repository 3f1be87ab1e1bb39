package v1alpha1

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/kube-reclaim/kube-reclaim/policy"
)

func ptr[T any](v T) *T { return &v }

func TestSetDefaultsFillsTheDefaultBlockAndLeavesPoolsSparse(t *testing.T) {
	in := &ReclaimPolicy{
		Default: &Settings{CPU: &ResourceSettings{Margin: ptr(0.5)}},
		Pools:   []Pool{{Name: "p", NodeSelector: map[string]string{"k": "v"}, Settings: Settings{Window: &metav1.Duration{Duration: time.Minute}}}},
	}
	SetDefaults(in)
	want := FromSettings(policy.DefaultSettings())
	want.CPU.Margin = ptr(0.5)
	if !reflect.DeepEqual(*in.Default, want) {
		t.Errorf("default block %s, want %s", show(*in.Default), show(want))
	}
	if p := in.Pools[0].Settings; p.Policy != nil || p.CPU != nil || p.Window.Duration != time.Minute {
		t.Errorf("a pool's unset fields must stay unset (inherited at conversion): %s", show(p))
	}
	cfg, err := ToConfig(in)
	if err != nil {
		t.Fatal(err)
	}
	pool := cfg.Default
	pool.Window = time.Minute
	if cfg.Default.CPU.Margin != 0.5 || cfg.Pools[0].Settings != pool {
		t.Errorf("converted default %+v, pool %+v; want the pool to inherit the default block", cfg.Default, cfg.Pools[0].Settings)
	}
}

func TestSetDefaultsOfAnEmptyFileAreTheBuiltInDefaults(t *testing.T) {
	in := &ReclaimPolicy{}
	SetDefaults(in)
	cfg, err := ToConfig(in)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(cfg, policy.Default()) {
		t.Errorf("got %+v, want %+v", cfg, policy.Default())
	}
}

func TestFromSettingsRoundTrips(t *testing.T) {
	s := policy.DefaultSettings()
	s.Peak, s.Policy, s.Memory.Minimum = policy.Percentile(99.9), policy.PolicyRequest, 1
	s.Eviction.CPUStarvation.Enabled, s.Eviction.MemoryPressure.EvictAbove = true, 0.95
	fs := FromSettings(s)
	got, err := overlay(policy.Settings{}, &fs)
	if err != nil || got != s {
		t.Errorf("round trip of %+v gave %+v, %v", s, got, err)
	}
}

func TestValidateSettingsBuiltInCode(t *testing.T) {
	if errs := ValidateSettings(policy.DefaultSettings(), field.NewPath("default")); len(errs) > 0 {
		t.Errorf("the built-in defaults do not validate: %v", errs)
	}
	bad := policy.Settings{Policy: "x", Peak: policy.PeakMax, ChangeThreshold: -1,
		CPU: policy.ResourceSettings{Margin: 1, MaxRatio: 2, Minimum: -1}, Memory: policy.ResourceSettings{Margin: 0.5, MaxRatio: 0.5}}
	want := []string{
		`s.policy: Unsupported value: "x": supported values: "usage", "request", "max-usage-request"`,
		`s.window: Invalid value: "0s": must be in (0s, 1h0m0s]`,
		`s.sampleAlignment: Invalid value: "0s": must be in (0s, 1m0s]`,
		"s.changeThreshold: Invalid value: -1: must be in [0,1]",
		"s.cpu.margin: Invalid value: 1: must be in [0,1)",
		"s.cpu.maxRatio: Invalid value: 2: must be in [0,1]",
		"s.cpu.minimum: Invalid value: -1: must be >= 0",
	}
	sameErrors(t, ValidateSettings(bad, field.NewPath("s")), want)
	// Zero eviction settings are the defaults; set ones are checked.
	bad = policy.DefaultSettings()
	bad.Eviction.MemoryPressure.EvictUntilBelow = 0.95
	bad.Eviction.CPUStarvation.Window = time.Second
	sameErrors(t, ValidateSettings(bad, field.NewPath("s")), []string{
		`s.eviction.cpuStarvation.window: Invalid value: "1s": must be in [5m0s, 24h0m0s]: starvation is a long condition, never a spike`,
		"s.eviction.memoryPressure.evictUntilBelow: Invalid value: 0.95: must be below evictAbove (0.9): evicting stops under a lower threshold than it starts at",
	})
}

// sameErrors fails unless errs are the messages want, in order.
func sameErrors(t *testing.T, errs field.ErrorList, want []string) {
	t.Helper()
	var got []string
	for _, e := range errs {
		got = append(got, e.Error())
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("errors:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestValidate(t *testing.T) {
	sel := func(op metav1.LabelSelectorOperator, values ...string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: op, Values: values}}}
	}
	node := map[string]string{"k": "v"}
	cases := []struct {
		name string
		in   ReclaimPolicy
		want []string
	}{
		{"a valid file", ReclaimPolicy{
			Default:  &Settings{Peak: ptr("p99.9"), Window: &metav1.Duration{Duration: time.Hour}},
			Pools:    []Pool{{Name: "a", NodeSelector: node, Settings: Settings{Memory: &ResourceSettings{Margin: ptr(0.0)}}}},
			Profiles: []Profile{{Name: "p", PodSelector: sel(metav1.LabelSelectorOpIn, "x"), SchedulerName: "s"}},
		}, nil},
		{"a window above an hour", ReclaimPolicy{Default: &Settings{Window: &metav1.Duration{Duration: 2 * time.Hour}}},
			[]string{`default.window: Invalid value: "2h0m0s": must be in (0s, 1h0m0s]`}},
		{"a percentile of zero", ReclaimPolicy{Pools: []Pool{{Name: "a", NodeSelector: node, Settings: Settings{Peak: ptr("p0")}}}},
			[]string{`pools[0].peak: Invalid value: "p0": want "max" or a percentile such as "p95" or "p99.9" (0 < N <= 100, at most 3 decimals), got "p0"`}},
		{"a pool without name or selector", ReclaimPolicy{Pools: []Pool{{}}}, []string{
			"pools[0].name: Required value",
			"pools[0].nodeSelector: Required value: a pool needs at least one label to select its nodes",
		}},
		{"an invalid label key in a node selector", ReclaimPolicy{Pools: []Pool{{Name: "a", NodeSelector: map[string]string{"bad key": "v"}}}},
			[]string{`pools[0].nodeSelector: Invalid value: "bad key": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')`}},
		{"duplicate pool names", ReclaimPolicy{Pools: []Pool{{Name: "a", NodeSelector: node}, {Name: "b", NodeSelector: node}, {Name: "a", NodeSelector: node}}},
			[]string{`pools[2].name: Duplicate value: "a"`}},
		{"a pool and a profile may share a name", ReclaimPolicy{Pools: []Pool{{Name: "a", NodeSelector: node}}, Profiles: []Profile{{Name: "a"}}}, nil},
		{"an invalid operator", ReclaimPolicy{Profiles: []Profile{{Name: "a", PodSelector: sel("Equals", "v")}}},
			[]string{`profiles[0].podSelector.matchExpressions[0].operator: Invalid value: "Equals": not a valid selector operator`}},
		{"In without values", ReclaimPolicy{Profiles: []Profile{{Name: "a", NamespaceSelector: sel(metav1.LabelSelectorOpIn)}}},
			[]string{"profiles[0].namespaceSelector.matchExpressions[0].values: Required value: must be specified when `operator` is 'In' or 'NotIn'"}},
		{"an invalid scheduler name", ReclaimPolicy{Profiles: []Profile{{Name: "a", SchedulerName: "Not_A_Name"}}},
			[]string{`profiles[0].schedulerName: Invalid value: "Not_A_Name": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`}},
		{"eviction thresholds out of range", ReclaimPolicy{Default: &Settings{Eviction: &Eviction{
			MemoryPressure: &MemoryPressure{EvictAbove: ptr(1.2), EvictUntilBelow: ptr(0.0)},
			CPUStarvation:  &CPUStarvation{NodeUsageAbove: ptr(-0.1), PodUsageBelow: ptr(2.0), Window: &metav1.Duration{Duration: time.Minute}}}}}, []string{
			"default.eviction.memoryPressure.evictAbove: Invalid value: 1.2: must be in (0,1]",
			"default.eviction.memoryPressure.evictUntilBelow: Invalid value: 0: must be in (0,1)",
			"default.eviction.cpuStarvation.nodeUsageAbove: Invalid value: -0.1: must be in (0,1]",
			"default.eviction.cpuStarvation.podUsageBelow: Invalid value: 2: must be in (0,1]",
			`default.eviction.cpuStarvation.window: Invalid value: "1m0s": must be in [5m0s, 24h0m0s]: starvation is a long condition, never a spike`,
		}},
		{"evicting must stop below where it starts", ReclaimPolicy{Default: &Settings{Eviction: &Eviction{
			MemoryPressure: &MemoryPressure{EvictAbove: ptr(0.8), EvictUntilBelow: ptr(0.8)}}}}, []string{
			"default.eviction.memoryPressure.evictUntilBelow: Invalid value: 0.8: must be below evictAbove (0.8): evicting stops under a lower threshold than it starts at",
		}},
		{"a pool's threshold is checked against the one it inherits", ReclaimPolicy{
			Default: &Settings{Eviction: &Eviction{MemoryPressure: &MemoryPressure{EvictUntilBelow: ptr(0.7)}}},
			Pools: []Pool{{Name: "ok", NodeSelector: node, Settings: Settings{Eviction: &Eviction{MemoryPressure: &MemoryPressure{EvictAbove: ptr(0.75)}}}},
				{Name: "low", NodeSelector: node, Settings: Settings{Eviction: &Eviction{MemoryPressure: &MemoryPressure{EvictAbove: ptr(0.6)}}}},
				{Name: "inherits", NodeSelector: node}}}, []string{
			"pools[1].eviction.memoryPressure.evictAbove: Invalid value: 0.6: must be above evictUntilBelow (0.7): evicting stops under a lower threshold than it starts at",
		}},
		{"a pool setting only evictUntilBelow above the built-in evictAbove", ReclaimPolicy{
			Pools: []Pool{{Name: "p", NodeSelector: node, Settings: Settings{Eviction: &Eviction{MemoryPressure: &MemoryPressure{EvictUntilBelow: ptr(0.95)}}}}}}, []string{
			"pools[0].eviction.memoryPressure.evictUntilBelow: Invalid value: 0.95: must be below evictAbove (0.9): evicting stops under a lower threshold than it starts at",
		}},
		{"duplicate profile names and a profile without a name", ReclaimPolicy{Profiles: []Profile{{Name: "a"}, {Name: "a"}, {}}},
			[]string{`profiles[1].name: Duplicate value: "a"`, "profiles[2].name: Required value"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { sameErrors(t, Validate(&tc.in), tc.want) })
	}
}

// show renders settings as the file would, for failure messages.
func show(s Settings) string {
	b, err := json.Marshal(s)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
