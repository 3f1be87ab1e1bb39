// Package reclaimable holds the contract every kube-reclaim role shares: the
// names of the two extended resources, the node annotation the publisher
// writes, and the rules that decide whether that annotation may be trusted.
package reclaimable

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

// DefaultDomain is the prefix of every resource and annotation name unless
// --resource-domain says otherwise.
const DefaultDomain = "kube-reclaim.io"

// Names are the resource and annotation names derived from one domain. Every
// role must be started with the same domain or they will not see each other.
type Names struct {
	Domain string
	// CPU is an integer count of millicores (extended resources must be integers).
	CPU corev1.ResourceName
	// Memory is an integer count of bytes.
	Memory corev1.ResourceName
	// Annotation is the node annotation carrying the published Annotation JSON.
	Annotation string
	// CPURatio and MemoryRatio are the node label keys that opt a node
	// into native oversell (see the webhook): OversellLabelPrefix, the
	// domain, then "-oversell-cpu-ratio" or "-oversell-memory-ratio", for
	// example node-restriction.kubernetes.io/kube-reclaim.io-oversell-cpu-ratio.
	CPURatio    string
	MemoryRatio string
	// ReclaimedLabel is the pod label that opts a pod into reclaimed
	// capacity with the value "true": the webhook rewrites it by the first
	// matching profile of the policy file.
	ReclaimedLabel string
	// OptOut is the pod annotation that, with the value "true", keeps
	// profiles from rewriting a pod that carries ReclaimedLabel.
	OptOut string
	// Profile is the pod annotation naming the profile that rewrote the pod.
	Profile string
	// ProfileRewrite is the pod annotation recording what that profile
	// rewrote (ProfileRewrite JSON).
	ProfileRewrite string
}

// OversellLabelPrefix is the prefix of the oversell opt-in labels. The
// NodeRestriction admission plugin forbids a kubelet to set labels under it
// on its own Node, so only an administrator can opt a node into oversell; a
// label of the domain itself, or any annotation, a node could set on itself.
// A label key has one '/', so the whole domain goes into the name part,
// which keeps the keys of two domains apart (the first DNS label alone would
// not: kube-reclaim.io and kube-reclaim.example.com).
const OversellLabelPrefix = "node-restriction.kubernetes.io/"

// NewNames validates domain and derives every name from it.
func NewNames(domain string) (Names, error) {
	if errs := validation.IsDNS1123Subdomain(domain); len(errs) > 0 {
		return Names{}, fmt.Errorf("resource domain %q is not a DNS subdomain: %v", domain, errs)
	}
	memoryRatio := OversellLabelPrefix + domain + "-oversell-memory-ratio"
	if errs := validation.IsQualifiedName(memoryRatio); len(errs) > 0 {
		return Names{}, fmt.Errorf("resource domain %q is too long to name the oversell label %s (the part after '/' has at most 63 characters): %v",
			domain, memoryRatio, errs)
	}
	return Names{
		Domain:      domain,
		CPU:         corev1.ResourceName(domain + "/reclaimed-cpu"),
		Memory:      corev1.ResourceName(domain + "/reclaimed-memory"),
		Annotation:  domain + "/reclaimable",
		CPURatio:    OversellLabelPrefix + domain + "-oversell-cpu-ratio",
		MemoryRatio: memoryRatio,

		ReclaimedLabel: domain + "/reclaimed",
		OptOut:         domain + "/opt-out",
		Profile:        domain + "/profile",
		ProfileRewrite: domain + "/profile-rewrite",
	}, nil
}

// MustNames is NewNames for constants known to be valid (tests, defaults).
func MustNames(domain string) Names {
	n, err := NewNames(domain)
	if err != nil {
		panic(err)
	}
	return n
}

// Resources is an amount of CPU and memory in the units the reclaimed
// resources are published in. Every role uses this one pair: what a pod asks
// for, what a node publishes, what the policy computes. The JSON keys are
// part of kubectl reclaim's -o json output.
type Resources struct {
	// CPUMilli is CPU in millicores.
	CPUMilli int64 `json:"cpuMilli"`
	// MemoryBytes is memory in bytes.
	MemoryBytes int64 `json:"memoryBytes"`
}

// IsZero reports whether both amounts are zero.
func (r Resources) IsZero() bool { return r.CPUMilli == 0 && r.MemoryBytes == 0 }

// Max returns the larger amount of each resource. The floor is the room
// maxed with what reclaimed pods hold (see docs/design.md#two-numbers-per-node).
func (r Resources) Max(o Resources) Resources {
	return Resources{CPUMilli: max(r.CPUMilli, o.CPUMilli), MemoryBytes: max(r.MemoryBytes, o.MemoryBytes)}
}

// Add returns the sum of two amounts.
func (r Resources) Add(o Resources) Resources {
	return Resources{CPUMilli: r.CPUMilli + o.CPUMilli, MemoryBytes: r.MemoryBytes + o.MemoryBytes}
}

// PodRequest returns the effective reclaimed request of a pod, aggregated the
// way the scheduler computes effective requests (see aggregate).
// limitsMismatch is true when any container's reclaimed request differs from
// its limit: extended resources cannot be overcommitted, so such a pod is
// invalid for scheduling onto reclaimed capacity.
func (n Names) PodRequest(pod *corev1.Pod) (req Resources, limitsMismatch bool) {
	req = aggregate(pod, func(c *corev1.Container) Resources {
		for _, name := range []corev1.ResourceName{n.CPU, n.Memory} {
			r, hasReq := c.Resources.Requests[name]
			l, hasLim := c.Resources.Limits[name]
			// The apiserver defaults a missing request to the limit, so only a
			// request without an equal limit is a mismatch.
			if hasReq && (!hasLim || r.Cmp(l) != 0) {
				limitsMismatch = true
			}
		}
		return Resources{
			CPUMilli:    requestOrLimit(c.Resources, n.CPU),
			MemoryBytes: requestOrLimit(c.Resources, n.Memory),
		}
	})
	req.CPUMilli += quantityValue(pod.Spec.Overhead, n.CPU)
	req.MemoryBytes += quantityValue(pod.Spec.Overhead, n.Memory)
	return req, limitsMismatch
}

// NativeRequest returns the pod's effective native CPU (millicores) and memory
// (bytes) requests, aggregated like PodRequest.
func NativeRequest(pod *corev1.Pod) Resources {
	r := aggregate(pod, func(c *corev1.Container) Resources {
		return Resources{CPUMilli: c.Resources.Requests.Cpu().MilliValue(), MemoryBytes: c.Resources.Requests.Memory().Value()}
	})
	r.CPUMilli += pod.Spec.Overhead.Cpu().MilliValue()
	r.MemoryBytes += pod.Spec.Overhead.Memory().Value()
	return r
}

// aggregate sums get over app containers and restartable (sidecar) init
// containers, and takes the larger of that and the largest regular init
// container, per resource: init containers run one at a time before the rest.
func aggregate(pod *corev1.Pod, get func(*corev1.Container) Resources) Resources {
	var sum, initMax Resources
	for i := range pod.Spec.Containers {
		sum = sum.Add(get(&pod.Spec.Containers[i]))
	}
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		r := get(c)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sum = sum.Add(r)
			continue
		}
		initMax.CPUMilli = max(initMax.CPUMilli, r.CPUMilli)
		initMax.MemoryBytes = max(initMax.MemoryBytes, r.MemoryBytes)
	}
	return Resources{CPUMilli: max(sum.CPUMilli, initMax.CPUMilli), MemoryBytes: max(sum.MemoryBytes, initMax.MemoryBytes)}
}

func requestOrLimit(r corev1.ResourceRequirements, name corev1.ResourceName) int64 {
	if q, ok := r.Requests[name]; ok {
		return q.Value()
	}
	return quantityValue(r.Limits, name)
}

func quantityValue(l corev1.ResourceList, name corev1.ResourceName) int64 {
	if q, ok := l[name]; ok {
		return q.Value()
	}
	return 0
}

// IsReclaimedPod reports whether the pod asks for any reclaimed resource.
func (n Names) IsReclaimedPod(pod *corev1.Pod) bool {
	r, _ := n.PodRequest(pod)
	return !r.IsZero()
}
