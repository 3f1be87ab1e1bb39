package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-reclaim/kube-reclaim/policy"
)

// SetDefaults fills every field of the default block the file leaves out
// with the built-in default. Pools are left sparse: a field a pool leaves
// out is the default block's, which ToConfig resolves, so that the defaults
// are written in one place (policy.DefaultSettings).
func SetDefaults(in *ReclaimPolicy) {
	if in.Default == nil {
		in.Default = &Settings{}
	}
	d := policy.DefaultSettings()
	s := in.Default
	setIfNil(&s.Policy, string(d.Policy))
	setIfNil(&s.Window, metav1.Duration{Duration: d.Window})
	setIfNil(&s.Peak, d.Peak.String())
	setIfNil(&s.SampleAlignment, metav1.Duration{Duration: d.SampleAlignment})
	setIfNil(&s.ChangeThreshold, d.ChangeThreshold)
	setIfNil(&s.CPU, ResourceSettings{})
	setIfNil(&s.Memory, ResourceSettings{})
	s.CPU.setDefaults(d.CPU)
	s.Memory.setDefaults(d.Memory)
	setIfNil(&s.Eviction, Eviction{})
	setIfNil(&s.Eviction.MemoryPressure, MemoryPressure{})
	setIfNil(&s.Eviction.CPUStarvation, CPUStarvation{})
	m, c := s.Eviction.MemoryPressure, s.Eviction.CPUStarvation
	setIfNil(&m.EvictAbove, d.Eviction.MemoryPressure.EvictAbove)
	setIfNil(&m.EvictUntilBelow, d.Eviction.MemoryPressure.EvictUntilBelow)
	setIfNil(&c.Enabled, d.Eviction.CPUStarvation.Enabled)
	setIfNil(&c.NodeUsageAbove, d.Eviction.CPUStarvation.NodeAbove)
	setIfNil(&c.PodUsageBelow, d.Eviction.CPUStarvation.PodBelow)
	setIfNil(&c.Window, metav1.Duration{Duration: d.Eviction.CPUStarvation.Window})
}

func (r *ResourceSettings) setDefaults(d policy.ResourceSettings) {
	setIfNil(&r.Margin, d.Margin)
	setIfNil(&r.MaxRatio, d.MaxRatio)
	setIfNil(&r.Minimum, d.Minimum)
}

func setIfNil[T any](p **T, v T) {
	if *p == nil {
		*p = &v
	}
}
