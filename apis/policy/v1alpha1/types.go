package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the apiVersion of this form of the policy file.
var GroupVersion = schema.GroupVersion{Group: "kube-reclaim.io", Version: "v1alpha1"}

// Kind is the kind of the policy file.
const Kind = "ReclaimPolicy"

// ReclaimPolicy is the policy file: how much of each node's idle capacity
// the publisher publishes, and which opted-in pods the webhook rewrites.
type ReclaimPolicy struct {
	metav1.TypeMeta `json:",inline"`

	// Default overrides the built-in defaults and applies to every node that
	// matches no pool.
	Default *Settings `json:"default,omitempty"`
	// Pools override the default block for the nodes their nodeSelector
	// matches. They are tried in order and the first match wins: put the most
	// specific pools first.
	Pools []Pool `json:"pools,omitempty"`
	// Profiles turn opted-in pods into reclaimed pods (read by the webhook).
	// The first profile in order whose selectors both match a pod wins.
	Profiles []Profile `json:"profiles,omitempty"`
}

// Settings are the parameters of the formula for one node.
type Settings struct {
	// Policy is the formula: usage, request or max-usage-request.
	Policy *string `json:"policy,omitempty"`
	// Window is how far back usage samples count, at most 1h.
	Window *metav1.Duration `json:"window,omitempty"`
	// Peak is the statistic over the window: max, or a nearest-rank
	// percentile pN with 0 < N <= 100 and at most 3 decimals (p95, p99.9).
	Peak *string `json:"peak,omitempty"`
	// SampleAlignment is how far apart a pod sample and a node sample may be
	// and still count as the same instant, at most 1m.
	SampleAlignment *metav1.Duration `json:"sampleAlignment,omitempty"`
	// ChangeThreshold is the relative increase, in [0,1], above which the
	// publisher republishes at once (small decreases: publisher
	// --decrease-threshold).
	ChangeThreshold *float64 `json:"changeThreshold,omitempty"`
	// CPU are the parameters of CPU, in millicores.
	CPU *ResourceSettings `json:"cpu,omitempty"`
	// Memory are the parameters of memory, in bytes.
	Memory *ResourceSettings `json:"memory,omitempty"`
	// Eviction says when the publisher's eviction controller (publisher
	// --eviction) evicts reclaimed pods: on measured pressure only, never
	// because the room dipped below what they hold.
	Eviction *Eviction `json:"eviction,omitempty"`
}

// Eviction are the thresholds of the eviction controller.
type Eviction struct {
	// MemoryPressure: evict reclaimed pods while the node's pods use too
	// much of its memory.
	MemoryPressure *MemoryPressure `json:"memoryPressure,omitempty"`
	// CPUStarvation: move a reclaimed pod starved of its CPU grant for a
	// long time. Off by default.
	CPUStarvation *CPUStarvation `json:"cpuStarvation,omitempty"`
}

// MemoryPressure compares the measured working set of all the node's pods,
// regular and reclaimed, with its allocatable memory.
type MemoryPressure struct {
	// EvictAbove is the share of allocatable memory, in (0,1], above which
	// reclaimed pods are evicted.
	EvictAbove *float64 `json:"evictAbove,omitempty"`
	// EvictUntilBelow is the share, in (0,1) and below evictAbove, under
	// which evicting stops.
	EvictUntilBelow *float64 `json:"evictUntilBelow,omitempty"`
}

// CPUStarvation: a reclaimed pod is starved when, in every cycle of the
// window on fresh data, the node's pods used at least nodeUsageAbove of
// allocatable CPU while the pod used less than podUsageBelow of its
// reclaimed CPU grant. It is then evicted so that it can run elsewhere.
type CPUStarvation struct {
	// Enabled turns the rule on; false by default.
	Enabled *bool `json:"enabled,omitempty"`
	// NodeUsageAbove is the share of allocatable CPU, in (0,1], the node's
	// pods must use for the node to count as saturated.
	NodeUsageAbove *float64 `json:"nodeUsageAbove,omitempty"`
	// PodUsageBelow is the share of its CPU grant, in (0,1], under which a
	// pod on a saturated node counts as starved.
	PodUsageBelow *float64 `json:"podUsageBelow,omitempty"`
	// Window is how long a pod must stay starved, in [5m, 24h].
	Window *metav1.Duration `json:"window,omitempty"`
}

// ResourceSettings are the parameters of one resource.
type ResourceSettings struct {
	// Margin is the fraction of allocatable never reclaimed, in [0,1). The
	// usage and max-usage-request policies apply it.
	Margin *float64 `json:"margin,omitempty"`
	// MaxRatio caps the reclaimable amount at this fraction of allocatable,
	// in [0,1].
	MaxRatio *float64 `json:"maxRatio,omitempty"`
	// Minimum is the smallest amount worth publishing (millicores or bytes);
	// anything less publishes zero.
	Minimum *int64 `json:"minimum,omitempty"`
}

// Pool is a named override of the default block for the nodes its
// nodeSelector matches. Every settings field it leaves out is the default
// block's.
type Pool struct {
	// Name identifies the pool in metrics, Events and kubectl reclaim; unique.
	Name string `json:"name"`
	// NodeSelector selects the pool's nodes: every label present on the node
	// with exactly this value. Required. Use labels a node cannot set on
	// itself (kube-reclaim.io/, which only the administrators deploy/'s
	// admission policy lists may set, node-restriction.kubernetes.io/, or
	// the kubernetes.io and k8s.io labels NodeRestriction keeps from
	// kubelets): the publisher refuses any other key unless
	// --allow-node-settable-pool-labels.
	NodeSelector map[string]string `json:"nodeSelector"`

	Settings `json:",inline"`
}

// Profile rewrites the opted-in pods it selects: every container's native
// cpu/memory requests become reclaimed requests and limits. Only pods with
// the label kube-reclaim.io/reclaimed: "true" reach the webhook, so the
// selectors narrow that set and never widen it.
type Profile struct {
	// Name is recorded on the rewritten pod; a unique DNS label.
	Name string `json:"name"`
	// NamespaceSelector selects by the pod's namespace labels; absent: every
	// namespace.
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`
	// PodSelector selects by the pod's labels; absent: every opted-in pod.
	PodSelector *metav1.LabelSelector `json:"podSelector,omitempty"`
	// SchedulerName, when set, replaces the pod's spec.schedulerName.
	SchedulerName string `json:"schedulerName,omitempty"`
	// PriorityClassName, when set, replaces the pod's spec.priorityClassName.
	PriorityClassName string `json:"priorityClassName,omitempty"`
}
