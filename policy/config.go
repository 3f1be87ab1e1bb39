package policy

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	kubeletapis "k8s.io/kubelet/pkg/apis"
)

// Defaults of the settings (see Default).
const (
	DefaultPolicy          = PolicyUsage
	DefaultWindow          = 5 * time.Minute
	DefaultPeak            = PeakMax
	DefaultSampleAlignment = 10 * time.Second
	DefaultChangeThreshold = 0.10
	DefaultCPUMargin       = 0.35
	DefaultMemoryMargin    = 0.35
	DefaultMaxRatio        = 1.0
	// DefaultCPUMinimum is 100 millicores.
	DefaultCPUMinimum = 100
	// DefaultMemoryMinimum is 128 MiB.
	DefaultMemoryMinimum = 128 << 20
	// MaxWindow bounds the window so that the usage history stays bounded.
	MaxWindow = time.Hour
	// DefaultEvictAbove and DefaultEvictUntilBelow are the memory pressure
	// thresholds, fractions of allocatable memory (docs/design.md,
	// "Eviction", says why).
	DefaultEvictAbove      = 0.90
	DefaultEvictUntilBelow = 0.85
	// DefaultStarvationNodeAbove, DefaultStarvationPodBelow and
	// DefaultStarvationWindow define CPU starvation, off by default.
	DefaultStarvationNodeAbove = 0.90
	DefaultStarvationPodBelow  = 0.50
	DefaultStarvationWindow    = 30 * time.Minute
)

// Settings are the policy parameters in force for one node.
type Settings struct {
	// Policy is the formula (config key "policy").
	Policy PolicyName
	// Window is how far back usage samples count ("window", a Go duration).
	Window time.Duration
	// Peak is the statistic over the window ("peak": "max" or "p95").
	Peak Peak
	// SampleAlignment is how far apart a pod sample and a node sample may be
	// and still be treated as the same instant ("sampleAlignment"). A pod
	// sample further away counts as missing for that node sample.
	SampleAlignment time.Duration
	// ChangeThreshold is the relative change of a value above which the
	// publisher republishes it ("changeThreshold"; see Decide).
	ChangeThreshold float64
	// CPU and Memory are the per-resource parameters ("cpu", "memory").
	CPU    ResourceSettings
	Memory ResourceSettings
	// Eviction are the thresholds of the publisher's eviction controller
	// ("eviction").
	Eviction EvictionSettings
}

// EvictionSettings say when the eviction controller evicts reclaimed pods:
// on measured pressure, never because the room dipped below what they hold.
type EvictionSettings struct {
	// MemoryPressure: evict when the node's pods use more memory than this
	// share of allocatable ("memoryPressure").
	MemoryPressure MemoryPressure
	// CPUStarvation: move a reclaimed pod starved of its CPU grant for a
	// long time ("cpuStarvation"); off by default.
	CPUStarvation CPUStarvation
}

// MemoryPressure are the memory thresholds, fractions of allocatable memory
// compared with the measured working set of all the node's pods.
type MemoryPressure struct {
	// EvictAbove starts evicting ("evictAbove"), in (0,1].
	EvictAbove float64
	// EvictUntilBelow is where evicting stops ("evictUntilBelow"), in
	// (0, EvictAbove): the gap keeps one eviction's measurement lag from
	// starting the next episode at once.
	EvictUntilBelow float64
}

// CPUStarvation defines a starved reclaimed pod: in every fresh cycle of
// Window, the node's pods used at least NodeAbove of allocatable CPU while
// the pod used less than PodBelow of its reclaimed CPU grant.
type CPUStarvation struct {
	Enabled   bool          // "enabled"
	NodeAbove float64       // "nodeUsageAbove", in (0,1]
	PodBelow  float64       // "podUsageBelow", in (0,1]
	Window    time.Duration // "window", at least MinStarvationWindow
}

// Bounds of the starvation window: starvation is a long condition, never a
// spike, and the controller keeps one time per starved pod, not a history.
const (
	MinStarvationWindow = 5 * time.Minute
	MaxStarvationWindow = 24 * time.Hour
)

// OrDefault returns e with every zero threshold replaced by its default:
// settings built in code (the replay's contenders, tests) that leave the
// eviction block out get the shipped behaviour, as a zero SampleAlignment
// does. A policy file is defaulted field by field before this.
func (e EvictionSettings) OrDefault() EvictionSettings {
	d := DefaultEviction()
	m, c := &e.MemoryPressure, &e.CPUStarvation
	if m.EvictAbove == 0 && m.EvictUntilBelow == 0 {
		*m = d.MemoryPressure
	}
	if c.NodeAbove == 0 {
		c.NodeAbove = d.CPUStarvation.NodeAbove
	}
	if c.PodBelow == 0 {
		c.PodBelow = d.CPUStarvation.PodBelow
	}
	if c.Window == 0 {
		c.Window = d.CPUStarvation.Window
	}
	return e
}

// DefaultEviction returns the built-in eviction settings.
func DefaultEviction() EvictionSettings {
	return EvictionSettings{
		MemoryPressure: MemoryPressure{EvictAbove: DefaultEvictAbove, EvictUntilBelow: DefaultEvictUntilBelow},
		CPUStarvation: CPUStarvation{NodeAbove: DefaultStarvationNodeAbove, PodBelow: DefaultStarvationPodBelow,
			Window: DefaultStarvationWindow},
	}
}

// ResourceSettings are the parameters of one resource.
type ResourceSettings struct {
	// Margin is the fraction of allocatable kept unreclaimed, in [0,1)
	// ("margin"). Applies to the usage and max-usage-request policies.
	Margin float64
	// MaxRatio caps the reclaimable amount at this fraction of allocatable,
	// in [0,1] ("maxRatio").
	MaxRatio float64
	// Minimum is the smallest amount worth publishing, in millicores or bytes
	// ("minimum", an integer); anything below publishes zero.
	Minimum int64
}

// DefaultSettings returns the built-in settings.
func DefaultSettings() Settings {
	return Settings{
		Policy:          DefaultPolicy,
		Window:          DefaultWindow,
		Peak:            DefaultPeak,
		SampleAlignment: DefaultSampleAlignment,
		ChangeThreshold: DefaultChangeThreshold,
		CPU:             ResourceSettings{Margin: DefaultCPUMargin, MaxRatio: DefaultMaxRatio, Minimum: DefaultCPUMinimum},
		Memory:          ResourceSettings{Margin: DefaultMemoryMargin, MaxRatio: DefaultMaxRatio, Minimum: DefaultMemoryMinimum},
		Eviction:        DefaultEviction(),
	}
}

// Config is a validated policy file.
type Config struct {
	// Default applies to nodes that match no pool.
	Default Settings
	// Pools in file order; the first whose selector matches a node wins.
	Pools []Pool
	// Profiles in file order; the first that selects a pod rewrites it.
	Profiles []Profile
}

// Pool is a named override for the nodes its selector matches.
type Pool struct {
	Name string
	// NodeSelector: every key must be a node label with exactly this value.
	NodeSelector map[string]string
	// Settings are fully resolved: built-in defaults, then the file's
	// default block, then the pool's own fields.
	Settings Settings
}

// Default returns the configuration used when there is no file: the built-in
// settings and no pools.
func Default() *Config {
	return &Config{Default: DefaultSettings()}
}

// For returns the settings for a node with the given labels and the name of
// the pool that selected them ("" for the default). The first pool in file
// order whose selector matches wins.
func (c *Config) For(labels map[string]string) (Settings, string) {
	for i := range c.Pools {
		if c.Pools[i].Matches(labels) {
			return c.Pools[i].Settings, c.Pools[i].Name
		}
	}
	return c.Default, ""
}

// Matches reports whether every selector entry is a label with that value.
// An empty selector matches nothing (the policy file's validation rejects
// it).
func (p *Pool) Matches(labels map[string]string) bool {
	if len(p.NodeSelector) == 0 {
		return false
	}
	for k, v := range p.NodeSelector {
		if got, ok := labels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// NodeSettableLabel reports whether the kubelet of a node can set the label
// key on its own Node, with the NodeRestriction admission plugin on: every
// key but those of the node-restriction.kubernetes.io namespace (or a
// subdomain of it) and those of the kubernetes.io and k8s.io namespaces
// that are not kubelet labels (kubernetes.io/hostname, the topology and
// instance-type labels, [*.]node.kubernetes.io/ and
// [*.]kubelet.kubernetes.io/: k8s.io/kubelet's IsKubeletLabel). Keys of
// domain/ are not either: deploy/'s admission policy kube-reclaim-node-keys
// leaves them, like node-restriction.kubernetes.io/<domain>-*, to the
// administrators it lists.
func NodeSettableLabel(key, domain string) bool {
	if strings.HasPrefix(key, domain+"/") {
		return false
	}
	ns, _, found := strings.Cut(key, "/")
	if !found {
		return true
	}
	in := func(parent string) bool { return ns == parent || strings.HasSuffix(ns, "."+parent) }
	if in("node-restriction.kubernetes.io") {
		return false
	}
	if in("kubernetes.io") || in("k8s.io") {
		return kubeletapis.IsKubeletLabel(key)
	}
	return true
}

// NodeSettablePoolKeys returns one sentence per pool nodeSelector key a
// node's own kubelet can set (NodeSettableLabel): such a node could put
// itself in the pool and choose the margins and caps that decide its own
// room. The publisher refuses such a file unless told to accept it.
func (c *Config) NodeSettablePoolKeys(domain string) []string {
	var out []string
	for i := range c.Pools {
		p := &c.Pools[i]
		for _, k := range slices.Sorted(maps.Keys(p.NodeSelector)) {
			if !NodeSettableLabel(k, domain) {
				continue
			}
			out = append(out, fmt.Sprintf("pools[%d] (%q): nodeSelector key %q is a label the node's own kubelet can set, "+
				"so a node can put itself in this pool and choose the settings of its own room; "+
				"select nodes by labels under %s/ or node-restriction.kubernetes.io/, which only administrators can set",
				i, p.Name, k, domain))
		}
	}
	return out
}

// MaxWindow returns the longest window of the default and of every pool, the
// history a caller must keep.
func (c *Config) MaxWindow() time.Duration {
	w := c.Default.Window
	for i := range c.Pools {
		w = max(w, c.Pools[i].Settings.Window)
	}
	return w
}

// MaxSampleAlignment returns the largest sample alignment of the default and
// of every pool (DefaultSampleAlignment where one is not set, as Compute
// reads it): how much older than a window's first node sample a pod sample
// may be and still count.
func (c *Config) MaxSampleAlignment() time.Duration {
	a := c.Default.alignment()
	for i := range c.Pools {
		a = max(a, c.Pools[i].Settings.alignment())
	}
	return a
}

// alignment is the sample alignment Compute uses: DefaultSampleAlignment
// when none is set.
func (s Settings) alignment() time.Duration {
	if s.SampleAlignment <= 0 {
		return DefaultSampleAlignment
	}
	return s.SampleAlignment
}
