package webhook

import (
	"errors"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kube-reclaim/kube-reclaim/policy"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// Results of a profile lookup, the label of the profile rewrites counter.
const (
	ProfileRewritten = "rewritten" // native requests became reclaimed requests
	ProfileOptedOut  = "opted-out" // labelled, but the opt-out annotation is set
	ProfileNoMatch   = "no-match"  // labelled, no profile selects it: denied
	ProfileDenied    = "denied"    // a profile selects it but it cannot be rewritten safely
	ProfileOwnSplit  = "own-split" // labelled and already requesting reclaimed resources (also every reinvocation): left as is
)

// ProfileRewriter turns pods carrying the opt-in label into reclaimed pods
// by the first profile of the policy file that selects them (a PodRewriter;
// the pod webhook enforces the result like any reclaimed pod). It reads
// namespaces and priority classes through the functions it is given, which
// must not call the API (informer listers): it runs on the request path.
type ProfileRewriter struct {
	names reclaimable.Names
	// config returns the policy file in force (hot reloaded).
	config func() *policy.Config
	// namespaceLabels returns a namespace's labels; an error when unknown.
	// Not called while the configuration has no profiles.
	namespaceLabels func(name string) (map[string]string, error)
	// priorityClass returns a PriorityClass; an error when unknown. Only
	// called for a profile with a priorityClassName.
	priorityClass func(name string) (*schedulingv1.PriorityClass, error)
	rewrites      *prometheus.CounterVec
}

// NewProfileRewriter returns a rewriter. reg receives its metrics (nil: a
// private registry).
func NewProfileRewriter(names reclaimable.Names, config func() *policy.Config,
	namespaceLabels func(string) (map[string]string, error),
	priorityClass func(string) (*schedulingv1.PriorityClass, error),
	reg prometheus.Registerer) *ProfileRewriter {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	r := &ProfileRewriter{names: names, config: config, namespaceLabels: namespaceLabels, priorityClass: priorityClass,
		rewrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "kube_reclaim", Subsystem: "webhook", Name: "profile_pods_total",
			Help: "Pods carrying the opt-in label, by profile (empty when none applied) and result: rewritten, opted-out, own-split, no-match, denied.",
		}, []string{"profile", "result"}),
	}
	reg.MustRegister(r.rewrites)
	return r
}

// RewritePod rewrites a pod that carries the opt-in label, is not opted out
// and requests no reclaimed resource yet: every container's native cpu and
// memory requests become reclaimed requests (== limits), the native ones
// are removed, the profile's schedulerName and priorityClassName are set,
// and the annotations record the profile and what was rewritten. Every
// other pod is left alone. A second call on its own result changes nothing:
// the rewritten pod requests reclaimed resources.
func (r *ProfileRewriter) RewritePod(namespace string, pod *corev1.Pod) error {
	if pod.Labels[r.names.ReclaimedLabel] != "true" {
		return nil
	}
	if pod.Annotations[r.names.OptOut] == "true" {
		r.rewrites.WithLabelValues("", ProfileOptedOut).Inc()
		return nil
	}
	if r.names.IsReclaimedPod(pod) {
		// Either this webhook's own result (reinvocation) or a pod that
		// chose its split of native and reclaimed itself: enforced as is.
		// No profile label: the annotation is the pod author's to write, and
		// a metric label must stay bounded.
		r.rewrites.WithLabelValues("", ProfileOwnSplit).Inc()
		return nil
	}
	cfg := r.config()
	var p *policy.Profile
	if len(cfg.Profiles) > 0 {
		nsLabels, err := r.namespaceLabels(namespace)
		if err != nil {
			r.rewrites.WithLabelValues("", ProfileDenied).Inc()
			return fmt.Errorf("kube-reclaim cannot read the labels of namespace %q to choose a profile (%w); retry", namespace, err)
		}
		p = cfg.Profile(nsLabels, pod.Labels)
	}
	if p == nil {
		r.rewrites.WithLabelValues("", ProfileNoMatch).Inc()
		return fmt.Errorf("pod carries %s=true but no kube-reclaim profile selects it in namespace %q: "+
			"remove the label to run on regular capacity, add the annotation %s=\"true\", or ask for a profile in the policy file",
			r.names.ReclaimedLabel, namespace, r.names.OptOut)
	}
	if err := r.apply(p, pod); err != nil {
		r.rewrites.WithLabelValues(p.Name, ProfileDenied).Inc()
		return fmt.Errorf("kube-reclaim profile %q cannot run this pod on reclaimed capacity: %w", p.Name, err)
	}
	r.rewrites.WithLabelValues(p.Name, ProfileRewritten).Inc()
	logrus.WithFields(logrus.Fields{"namespace": truncated(namespace), "pod": truncated(podName(pod)), "profile": p.Name,
		"rewrite": truncated(pod.Annotations[r.names.ProfileRewrite])}).Debug("profile rewrote pod")
	return nil
}

// apply rewrites pod for p, or changes nothing and says what is missing.
func (r *ProfileRewriter) apply(p *policy.Profile, pod *corev1.Pod) error {
	rec, err := ToReclaimed(&pod.Spec, r.names)
	if err != nil {
		return err
	}
	var pc *schedulingv1.PriorityClass
	if p.PriorityClassName != "" {
		if pc, err = r.priorityClass(p.PriorityClassName); err != nil {
			return fmt.Errorf("its priorityClassName %q: %w", p.PriorityClassName, err)
		}
	}
	if err := toReclaimed(&pod.Spec, r.names, rec); err != nil {
		return err // cannot happen: ToReclaimed checked the same pod
	}
	if p.SchedulerName != "" {
		pod.Spec.SchedulerName = p.SchedulerName
	}
	if pc != nil {
		// The Priority admission plugin has resolved the pod's own class
		// into spec.priority before any webhook runs, and runs again when a
		// webhook changed the pod (reinvocationPolicy IfNeeded). Setting the
		// class alone is refused there, as the real apiserver answers:
		// "the integer value of priority (0) must not be provided in pod
		// spec; priority admission controller computed -5 from the given
		// PriorityClass name". So the class, its value and its preemption
		// policy change together.
		pod.Spec.PriorityClassName = pc.Name
		v := pc.Value
		pod.Spec.Priority = &v
		pod.Spec.PreemptionPolicy = pc.PreemptionPolicy
	}
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[r.names.Profile] = p.Name
	pod.Annotations[r.names.ProfileRewrite] = rec.String()
	return nil
}

// ToReclaimed checks that every container (init and sidecar containers
// included) of spec can be moved onto reclaimed capacity, and returns what
// the move would rewrite without changing spec. A container must request
// both CPU and memory natively: the amounts become its reclaimed grant, and
// with it the CFS quota and memory limit kubelet enforces. A container
// without them would run unbounded, so the pod is refused with every
// missing request named.
func ToReclaimed(spec *corev1.PodSpec, names reclaimable.Names) (reclaimable.ProfileRewrite, error) {
	rec := reclaimable.ProfileRewrite{}
	var problems []string
	each(spec, func(c *corev1.Container, kind string) {
		var missing []string
		cpu, memory := c.Resources.Requests[corev1.ResourceCPU], c.Resources.Requests[corev1.ResourceMemory]
		if cpu.Sign() <= 0 {
			missing = append(missing, "cpu")
		}
		if memory.Sign() <= 0 {
			missing = append(missing, "memory")
		}
		if len(missing) > 0 {
			problems = append(problems, fmt.Sprintf("%s %q requests no %s: add resources.requests.%s (it becomes the container's reclaimed grant and its limit)",
				kind, c.Name, strings.Join(missing, " or "), strings.Join(missing, " and resources.requests.")))
			return
		}
		rec[c.Name] = reclaimable.Resources{CPUMilli: cpu.MilliValue(), MemoryBytes: memory.Value()}
	})
	if len(problems) > 0 {
		return nil, errors.New(strings.Join(problems, "; "))
	}
	return rec, nil
}

// toReclaimed moves the native requests recorded in rec into reclaimed
// requests and limits (extended resources cannot be overcommitted, so
// request == limit). Native limits stay for enforcement to lower to the
// grant.
func toReclaimed(spec *corev1.PodSpec, names reclaimable.Names, rec reclaimable.ProfileRewrite) error {
	var err error
	each(spec, func(c *corev1.Container, _ string) {
		amt, ok := rec[c.Name]
		if !ok {
			err = fmt.Errorf("container %q has no rewrite record", c.Name)
			return
		}
		delete(c.Resources.Requests, corev1.ResourceCPU)
		delete(c.Resources.Requests, corev1.ResourceMemory)
		if c.Resources.Limits == nil {
			c.Resources.Limits = corev1.ResourceList{}
		}
		for name, v := range map[corev1.ResourceName]int64{names.CPU: amt.CPUMilli, names.Memory: amt.MemoryBytes} {
			q := *resource.NewQuantity(v, resource.DecimalSI)
			c.Resources.Requests[name] = q
			c.Resources.Limits[name] = q
		}
	})
	return err
}

// each visits init containers, then containers, with a word for messages.
// Ephemeral containers are never part of a pod creation.
func each(spec *corev1.PodSpec, f func(c *corev1.Container, kind string)) {
	for i := range spec.InitContainers {
		f(&spec.InitContainers[i], "init container")
	}
	for i := range spec.Containers {
		f(&spec.Containers[i], "container")
	}
}

func podName(pod *corev1.Pod) string {
	if pod.Name != "" {
		return pod.Name
	}
	return pod.GenerateName + "*"
}
