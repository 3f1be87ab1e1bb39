package policy

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// Sample is one usage measurement (metrics.k8s.io NodeMetrics or PodMetrics).
type Sample struct {
	// Time is the timestamp of the measurement (the end of its window).
	Time time.Time
	// CPUMilli is CPU usage in millicores.
	CPUMilli int64
	// MemoryBytes is memory usage (working set) in bytes.
	MemoryBytes int64
}

// Pod is one pod bound to the node. The caller passes every pod that is bound
// to the node and not terminal (Succeeded or Failed): such pods hold their
// requests and may use resources.
type Pod struct {
	Namespace string
	Name      string
	UID       string
	// Requests are the pod's native CPU and memory requests (what the
	// scheduler counts against allocatable). Ignored for reclaimed pods.
	Requests reclaimable.Resources
	// Reclaimed is true for pods that run on reclaimed resources (they request
	// the reclaimed-cpu/-memory extended resources). Their requests are not
	// regular requests and their usage is subtracted from the node usage.
	Reclaimed bool
	// Grant is what a reclaimed pod requests of the reclaimed resources.
	// kubelet enforces it as the pod's limits, so usage reported above it
	// cannot be the pod's: only up to the grant is subtracted. That also
	// bounds what a forged report of the pod's usage can add to the room,
	// since metrics.k8s.io does not say which node reported a pod.
	Grant reclaimable.Resources
	// StartTime is status.startTime; zero while the pod has not started. A
	// regular pod that has not started, or started after the newest node
	// sample, cannot be part of the measured usage and counts at its request.
	StartTime time.Time
	// Samples is the pod's usage history, ascending by Time.
	Samples []Sample
	// Series, when not the zero value, is read in place of Samples: the
	// pod's series in a History, read where it is kept: the publisher hands
	// the policy every sample of every pod each period, and copying them out
	// first was a large part of its cycle (docs/benchmarks.md, "Memory and
	// CPU at 5,000 nodes").
	Series PodSeries
}

// Node is everything the policy needs to know about one node.
type Node struct {
	Name string
	// Capacity is status.capacity (informational; the built-in policies
	// work from Allocatable).
	Capacity reclaimable.Resources
	// Allocatable is status.allocatable for native cpu and memory.
	Allocatable reclaimable.Resources
	// Pods bound to the node and not terminal, reclaimed or not.
	Pods []Pod
	// Samples is the node's usage history, ascending by Time.
	Samples []Sample
}

// Result is the outcome of a policy for one node.
type Result struct {
	// Resources are the reclaimable amounts to publish. They are never
	// negative and always rounded down.
	reclaimable.Resources
	// Policy is the policy that produced the values.
	Policy PolicyName
	// MetricsTime is the time of the newest node usage sample (zero when
	// there was none).
	MetricsTime time.Time
	// ZeroReason is set (ZeroReasonStale, ZeroReasonNoSamples,
	// ZeroReasonInvalidSettings) when zero is published on purpose rather than
	// computed; empty otherwise, including when the formula itself gives zero.
	ZeroReason string
	// Explanation carries every term of the formula.
	Explanation reclaimable.Explanation
}

// Reasons for publishing zero on purpose; stable strings for the annotation,
// metrics labels and logs.
const (
	// ZeroReasonNoSamples: the node has no usage sample at all.
	ZeroReasonNoSamples = "no-samples"
	// ZeroReasonStale: the newest node usage sample is older than the stale window.
	ZeroReasonStale = "metrics-stale"
	// ZeroReasonInvalidSettings: the settings name an unknown policy (only
	// possible with hand-built Settings; Load rejects them).
	ZeroReasonInvalidSettings = "invalid-settings"
)

// PolicyName names one of the built-in policies.
type PolicyName string

const (
	// PolicyUsage: allocatable x (1 - margin) - peak usage of non-reclaimed
	// work - requests of regular pods not yet measured.
	PolicyUsage PolicyName = "usage"
	// PolicyRequest: allocatable - requests of regular pods.
	PolicyRequest PolicyName = "request"
	// PolicyMaxUsageRequest: like usage, but each regular pod counts at
	// max(usage, request).
	PolicyMaxUsageRequest PolicyName = "max-usage-request"
)

// Policies lists the valid policy names.
var Policies = []PolicyName{PolicyUsage, PolicyRequest, PolicyMaxUsageRequest}

// Valid reports whether p is a known policy.
func (p PolicyName) Valid() bool {
	switch p {
	case PolicyUsage, PolicyRequest, PolicyMaxUsageRequest:
		return true
	}
	return false
}

// Peak is the statistic taken over the usage window: the maximum, or a
// percentile (nearest rank). The value is the percentile in thousandths of a
// percent (95000 is p95, 99900 is p99.9); the zero value and 100000 both mean
// the maximum.
type Peak uint32

// PeakMax is the maximum over the window.
const PeakMax Peak = 0

// Percentile returns the peak for the given percentile in (0, 100], rounded
// to thousandths of a percent.
func Percentile(p float64) Peak {
	k := int64(p*1000 + 0.5)
	if k <= 0 {
		k = 1
	}
	if k >= 100000 {
		return PeakMax
	}
	return Peak(k)
}

// IsMax reports whether the statistic is the maximum.
func (p Peak) IsMax() bool { return p == PeakMax || p >= 100000 }

// String renders the peak the way the config file spells it: "max", "p95",
// "p99.9".
func (p Peak) String() string {
	if p.IsMax() {
		return "max"
	}
	s := strconv.FormatUint(uint64(p/1000), 10)
	if frac := p % 1000; frac != 0 {
		f := fmt.Sprintf("%03d", frac)
		s += "." + strings.TrimRight(f, "0")
	}
	return "p" + s
}

// ParsePeak parses "max" or a percentile "pN" with 0 < N <= 100 and at most
// three decimals ("p95", "p99.9"). "p100" is the maximum.
func ParsePeak(s string) (Peak, error) {
	if s == "max" {
		return PeakMax, nil
	}
	const want = `want "max" or a percentile such as "p95" or "p99.9" (0 < N <= 100, at most 3 decimals)`
	if !strings.HasPrefix(s, "p") || len(s) < 2 {
		return 0, fmt.Errorf("%s, got %q", want, s)
	}
	num := s[1:]
	for _, c := range num {
		if (c < '0' || c > '9') && c != '.' {
			return 0, fmt.Errorf("%s, got %q", want, s)
		}
	}
	whole, frac, _ := strings.Cut(num, ".")
	if whole == "" || len(frac) > 3 || strings.HasSuffix(num, ".") {
		return 0, fmt.Errorf("%s, got %q", want, s)
	}
	w, err := strconv.ParseUint(whole, 10, 32)
	if err != nil || w > 100 {
		return 0, fmt.Errorf("%s, got %q", want, s)
	}
	var f uint64
	if frac != "" {
		f, _ = strconv.ParseUint((frac + "00")[:3], 10, 32)
	}
	k := w*1000 + f
	if k == 0 || k > 100000 {
		return 0, fmt.Errorf("%s, got %q", want, s)
	}
	if k == 100000 {
		return PeakMax, nil
	}
	return Peak(k), nil
}
