package v1alpha1

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-reclaim/kube-reclaim/policy"
)

// ToConfig converts a defaulted (SetDefaults) and valid (Validate) file to
// the configuration package policy computes with. Each pool starts from the
// default block and overrides the fields it sets.
func ToConfig(in *ReclaimPolicy) (*policy.Config, error) {
	if in.Default == nil {
		return nil, fmt.Errorf("policy file not defaulted: call SetDefaults first")
	}
	cfg := &policy.Config{}
	var err error
	if cfg.Default, err = overlay(policy.DefaultSettings(), in.Default); err != nil {
		return nil, fmt.Errorf("default: %w", err)
	}
	for i := range in.Pools {
		p := &in.Pools[i]
		s, err := overlay(cfg.Default, &p.Settings)
		if err != nil {
			return nil, fmt.Errorf("pools[%d]: %w", i, err)
		}
		cfg.Pools = append(cfg.Pools, policy.Pool{Name: p.Name, NodeSelector: p.NodeSelector, Settings: s})
	}
	for i := range in.Profiles {
		p := &in.Profiles[i]
		prof, err := policy.NewProfile(p.Name, p.NamespaceSelector, p.PodSelector, p.SchedulerName, p.PriorityClassName)
		if err != nil {
			return nil, fmt.Errorf("profiles[%d]: %w", i, err)
		}
		cfg.Profiles = append(cfg.Profiles, prof)
	}
	return cfg, nil
}

// overlay returns base with every field s sets replaced by s's.
func overlay(base policy.Settings, s *Settings) (policy.Settings, error) {
	if s.Policy != nil {
		base.Policy = policy.PolicyName(*s.Policy)
	}
	if s.Window != nil {
		base.Window = s.Window.Duration
	}
	if s.Peak != nil {
		pk, err := policy.ParsePeak(*s.Peak)
		if err != nil {
			return base, err
		}
		base.Peak = pk
	}
	if s.SampleAlignment != nil {
		base.SampleAlignment = s.SampleAlignment.Duration
	}
	if s.ChangeThreshold != nil {
		base.ChangeThreshold = *s.ChangeThreshold
	}
	overlayResource(&base.CPU, s.CPU)
	overlayResource(&base.Memory, s.Memory)
	overlayEviction(&base.Eviction, s.Eviction)
	return base, nil
}

func overlayEviction(base *policy.EvictionSettings, e *Eviction) {
	if e == nil {
		return
	}
	if m := e.MemoryPressure; m != nil {
		setIfSet(&base.MemoryPressure.EvictAbove, m.EvictAbove)
		setIfSet(&base.MemoryPressure.EvictUntilBelow, m.EvictUntilBelow)
	}
	if c := e.CPUStarvation; c != nil {
		setIfSet(&base.CPUStarvation.Enabled, c.Enabled)
		setIfSet(&base.CPUStarvation.NodeAbove, c.NodeUsageAbove)
		setIfSet(&base.CPUStarvation.PodBelow, c.PodUsageBelow)
		if c.Window != nil {
			base.CPUStarvation.Window = c.Window.Duration
		}
	}
}

func setIfSet[T any](dst *T, v *T) {
	if v != nil {
		*dst = *v
	}
}

func overlayResource(base *policy.ResourceSettings, r *ResourceSettings) {
	if r == nil {
		return
	}
	if r.Margin != nil {
		base.Margin = *r.Margin
	}
	if r.MaxRatio != nil {
		base.MaxRatio = *r.MaxRatio
	}
	if r.Minimum != nil {
		base.Minimum = *r.Minimum
	}
}

// FromSettings is the file form of s, every field set: the inverse of the
// conversion ToConfig does.
func FromSettings(s policy.Settings) Settings {
	resource := func(r policy.ResourceSettings) *ResourceSettings {
		return &ResourceSettings{Margin: &r.Margin, MaxRatio: &r.MaxRatio, Minimum: &r.Minimum}
	}
	name, peak := string(s.Policy), s.Peak.String()
	m, c := s.Eviction.MemoryPressure, s.Eviction.CPUStarvation
	eviction := &Eviction{
		MemoryPressure: &MemoryPressure{EvictAbove: &m.EvictAbove, EvictUntilBelow: &m.EvictUntilBelow},
		CPUStarvation: &CPUStarvation{Enabled: &c.Enabled, NodeUsageAbove: &c.NodeAbove, PodUsageBelow: &c.PodBelow,
			Window: &metav1.Duration{Duration: c.Window}},
	}
	return Settings{
		Policy:          &name,
		Window:          &metav1.Duration{Duration: s.Window},
		Peak:            &peak,
		SampleAlignment: &metav1.Duration{Duration: s.SampleAlignment},
		ChangeThreshold: &s.ChangeThreshold,
		CPU:             resource(s.CPU),
		Memory:          resource(s.Memory),
		Eviction:        eviction,
	}
}
