// Package enforcement makes kubelet hold a reclaimed pod to what it was
// granted, without a node agent: it writes native cpu/memory limits and
// explicit native requests into the containers that ask for reclaimed
// resources, and checks that a stored pod carries them.
//
// kubelet sets a container's CFS quota and memory limit from its native
// limits and its CPU shares from its native requests. A container that asks
// for reclaimed resources is given
//
//	limits.cpu    = requests.cpu    + <domain>/reclaimed-cpu    (millicores)
//	limits.memory = requests.memory + <domain>/reclaimed-memory (bytes)
//
// (its grant), and its native requests are written explicitly, "0" when
// absent, because API defaulting copies a limit into an absent request and
// the container would then take native allocatable. A native limit of its
// own that is positive and not above the grant is kept; a higher one is
// lowered to the grant. The pod becomes Burstable, gets the minimum CPU
// shares for a zero request, and is among the first kubelet evicts.
//
// Rules, for every container and init container (ephemeral containers
// cannot carry resources). A container takes part when its reclaimed cpu or
// memory amount (request, else limit) is positive; a container that does not
// is never changed. Enforce refuses the whole pod, listing every problem,
// when a container
//   - has a reclaimed request that is not equal to its limit, or a request
//     without a limit (extended resources cannot be overcommitted);
//   - has a negative reclaimed amount;
//   - takes part but would be granted no memory (no reclaimed memory and no
//     native memory request): it would run without a memory limit;
//   - takes part but would be granted no CPU (no reclaimed cpu and no native
//     cpu request): it would run without a CPU quota;
//   - has a grant that does not fit in 64 bits.
//
// Enforce is idempotent: a second call (reinvocation, a second webhook)
// changes nothing. Enforced reports whether Enforce would change nothing and
// not fail, which is what a stored pod must satisfy to be placed on
// reclaimed capacity.
//
// The package imports only Kubernetes API types and package reclaimable, so
// the webhook, the extender and kubectl reclaim can all use it.
package enforcement

import (
	"fmt"
	"math"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// Reason classifies one problem; the webhook counts denials by it.
type Reason string

// Reasons a container cannot be made safe, or is not enforced.
const (
	ReasonRequestNotLimit Reason = "RequestNotLimit"
	ReasonNegative        Reason = "Negative"
	ReasonNoMemoryGrant   Reason = "NoMemoryGrant"
	ReasonNoCPUGrant      Reason = "NoCPUGrant"
	ReasonTooLarge        Reason = "TooLarge"
	// ReasonNotEnforced is only reported by Enforced: Enforce would change
	// the container.
	ReasonNotEnforced Reason = "NotEnforced"
)

// Problem is one thing wrong with one container.
type Problem struct {
	// Container is the container's name, InitContainer whether it is an init
	// container.
	Container     string
	InitContainer bool
	Reason        Reason
	// Message says what is wrong and what to change.
	Message string
}

func (p Problem) String() string {
	kind := "container"
	if p.InitContainer {
		kind = "init container"
	}
	return fmt.Sprintf("%s %q: %s", kind, p.Container, p.Message)
}

// Error lists every problem of a pod at once.
type Error struct {
	// Enforced is true for an error of Enforced, false for one of Enforce.
	Enforced bool
	Problems []Problem
}

func (e *Error) Error() string {
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		parts[i] = p.String()
	}
	head := "pod cannot run on reclaimed capacity safely"
	if e.Enforced {
		head = "pod's reclaimed containers are not enforced by kubelet limits"
	}
	return head + ": " + strings.Join(parts, "; ")
}

// Reasons returns the distinct reasons of the problems, in order of first
// appearance.
func (e *Error) Reasons() []Reason {
	var out []Reason
	seen := map[Reason]bool{}
	for _, p := range e.Problems {
		if !seen[p.Reason] {
			seen[p.Reason] = true
			out = append(out, p.Reason)
		}
	}
	return out
}

// Enforce writes the native limits and requests of every container that asks
// for reclaimed resources (see the package documentation). It changes
// nothing and returns an *Error when any container cannot be made safe.
func Enforce(spec *corev1.PodSpec, names reclaimable.Names) (changed bool, err error) {
	var probs []Problem
	var plans []plan
	visit(spec, func(c *corev1.Container, init bool) {
		p, ps := planFor(c, init, names)
		probs = append(probs, ps...)
		if p.takesPart {
			plans = append(plans, p)
		}
	})
	if len(probs) > 0 {
		return false, &Error{Problems: probs}
	}
	for _, p := range plans {
		if p.apply() {
			changed = true
		}
	}
	return changed, nil
}

// Enforced returns nil when the pod asks for no reclaimed resource or every
// container that does carries native limits within its grant and explicit
// native requests, i.e. when Enforce would change nothing and not fail.
// Otherwise it returns an *Error naming each container and what is missing.
func Enforced(spec *corev1.PodSpec, names reclaimable.Names) error {
	var probs []Problem
	visit(spec, func(c *corev1.Container, init bool) {
		p, ps := planFor(c, init, names)
		probs = append(probs, ps...)
		if len(ps) == 0 && p.takesPart {
			if msg := p.missing(); msg != "" {
				probs = append(probs, Problem{Container: c.Name, InitContainer: init, Reason: ReasonNotEnforced, Message: msg})
			}
		}
	})
	if len(probs) > 0 {
		return &Error{Enforced: true, Problems: probs}
	}
	return nil
}

func visit(spec *corev1.PodSpec, f func(c *corev1.Container, init bool)) {
	for i := range spec.InitContainers {
		f(&spec.InitContainers[i], true)
	}
	for i := range spec.Containers {
		f(&spec.Containers[i], false)
	}
}

// native is what one native resource (cpu or memory) of a container gets.
type native struct {
	name       corev1.ResourceName
	grant      int64 // millicores or bytes
	hasRequest bool
	limit      int64 // 0 when absent
	hasLimit   bool
	overflow   bool // request + reclaimed overflows int64
}

// plan is the outcome of Enforce for one container.
type plan struct {
	c         *corev1.Container
	takesPart bool
	cpu, mem  native
}

func planFor(c *corev1.Container, init bool, names reclaimable.Names) (plan, []Problem) {
	p := plan{c: c}
	var probs []Problem
	problem := func(r Reason, format string, args ...any) {
		probs = append(probs, Problem{Container: c.Name, InitContainer: init, Reason: r, Message: fmt.Sprintf(format, args...)})
	}
	amount := func(name corev1.ResourceName) int64 {
		req, hasReq := c.Resources.Requests[name]
		lim, hasLim := c.Resources.Limits[name]
		switch {
		case hasReq && !hasLim:
			problem(ReasonRequestNotLimit, "%s has a request (%s) but no limit; set limits.%s equal to the request (extended resources cannot be overcommitted)",
				name, req.String(), name)
		case hasReq && req.Cmp(lim) != 0:
			problem(ReasonRequestNotLimit, "%s request %s differs from its limit %s; set them equal (extended resources cannot be overcommitted)",
				name, req.String(), lim.String())
		}
		v := int64(0)
		if hasReq {
			v = req.Value()
		} else if hasLim {
			v = lim.Value()
		}
		if v < 0 {
			problem(ReasonNegative, "%s is negative (%d); request a positive amount", name, v)
			return 0
		}
		return v
	}
	reclaimedCPU, reclaimedMem := amount(names.CPU), amount(names.Memory)
	p.takesPart = reclaimedCPU > 0 || reclaimedMem > 0
	if !p.takesPart {
		return p, probs
	}
	p.cpu = nativeOf(c, corev1.ResourceCPU, reclaimedCPU, func(q *resource.Quantity) int64 { return q.MilliValue() })
	p.mem = nativeOf(c, corev1.ResourceMemory, reclaimedMem, func(q *resource.Quantity) int64 { return q.Value() })
	for _, n := range []native{p.cpu, p.mem} {
		if n.overflow {
			problem(ReasonTooLarge, "its %s grant (native request + reclaimed amount) does not fit in 64 bits; request a realistic amount", n.name)
			return p, probs
		}
	}
	if p.mem.grant <= 0 {
		problem(ReasonNoMemoryGrant, "asks for %s but is granted no memory (no %s, no native memory request), so it would run without a memory limit; add %s (requests and limits) or a native memory request",
			names.CPU, names.Memory, names.Memory)
	}
	if p.cpu.grant <= 0 {
		problem(ReasonNoCPUGrant, "asks for %s but is granted no CPU (no %s, no native cpu request), so it would run without a CPU quota; add %s (requests and limits) or a native cpu request",
			names.Memory, names.CPU, names.CPU)
	}
	return p, probs
}

func nativeOf(c *corev1.Container, name corev1.ResourceName, reclaimed int64, value func(*resource.Quantity) int64) native {
	n := native{name: name, grant: reclaimed}
	if q, ok := c.Resources.Requests[name]; ok {
		n.hasRequest = true
		v := value(&q)
		if v > 0 && n.grant > math.MaxInt64-v {
			n.overflow = true
		}
		n.grant += v
	}
	if q, ok := c.Resources.Limits[name]; ok {
		n.hasLimit = true
		n.limit = value(&q)
	}
	return n
}

// limitOK: a container's own limit is kept when it is positive (a zero limit
// means none to kubelet) and not above the grant.
func (n native) limitOK() bool { return n.hasLimit && n.limit > 0 && n.limit <= n.grant }

func (p plan) apply() (changed bool) {
	for _, n := range []native{p.cpu, p.mem} {
		r := &p.c.Resources
		if !n.hasRequest {
			if r.Requests == nil {
				r.Requests = corev1.ResourceList{}
			}
			r.Requests[n.name] = zero(n.name)
			changed = true
		}
		if !n.limitOK() {
			if r.Limits == nil {
				r.Limits = corev1.ResourceList{}
			}
			r.Limits[n.name] = quantity(n.name, n.grant)
			changed = true
		}
	}
	return changed
}

func (p plan) missing() string {
	var miss []string
	for _, n := range []native{p.cpu, p.mem} {
		if !n.hasRequest {
			miss = append(miss, fmt.Sprintf("no explicit requests.%s (set it, \"0\" when it has none)", n.name))
		}
		switch {
		case !n.hasLimit:
			miss = append(miss, fmt.Sprintf("no limits.%s (set it to its grant %s)", n.name, format(n.name, n.grant)))
		case !n.limitOK():
			miss = append(miss, fmt.Sprintf("limits.%s %s is not within its grant %s (0 < limit <= grant)", n.name, format(n.name, n.limit), format(n.name, n.grant)))
		}
	}
	if len(miss) == 0 {
		return ""
	}
	return strings.Join(miss, ", ") + "; create it through the kube-reclaim pod webhook, which sets them"
}

func zero(name corev1.ResourceName) resource.Quantity {
	if name == corev1.ResourceMemory {
		return *resource.NewQuantity(0, resource.BinarySI)
	}
	return *resource.NewQuantity(0, resource.DecimalSI)
}

func quantity(name corev1.ResourceName, v int64) resource.Quantity {
	if name == corev1.ResourceMemory {
		return *resource.NewQuantity(v, resource.BinarySI)
	}
	return *resource.NewMilliQuantity(v, resource.DecimalSI)
}

func format(name corev1.ResourceName, v int64) string {
	q := quantity(name, v)
	return q.String()
}
