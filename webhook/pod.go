package webhook

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"github.com/kube-reclaim/kube-reclaim/enforcement"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// PodPath is the URL path of the pod webhook.
const PodPath = "/mutate-pod"

// DenialRewrite labels denials for a PodRewriter error.
const DenialRewrite = "Rewrite"

// DenialResize labels denials of an in-place resize (pods/resize) that takes
// a reclaimed container outside its grant.
const DenialResize = "ResizeBeyondGrant"

// PodRewriter changes a pod before it is enforced, for example to turn the
// native requests of a pod that opted in into reclaimed requests. It is
// called for every pod the webhook reviews (CREATE of pods), before
// enforcement.Enforce, with the request's namespace (the pod's own may be
// empty on create) and a copy of the pod it may change.
//
// Only metadata.labels, metadata.annotations, spec.schedulerName,
// spec.priorityClassName, spec.priority, spec.preemptionPolicy and the
// resources of containers and init containers are patched back; a change to anything else denies the pod
// (the webhook would otherwise drop it silently). An error denies the pod
// with the error's message. It must be idempotent: the apiserver reinvokes
// the webhook on a pod it already rewrote (reinvocationPolicy IfNeeded).
type PodRewriter interface {
	RewritePod(namespace string, pod *corev1.Pod) error
}

// podMutator makes kubelet hold reclaimed pods to their grant (package
// enforcement) on pod creation.
type podMutator struct {
	names   reclaimable.Names
	metrics *metrics
	// rewriter, when set, runs before enforcement (profiles).
	rewriter PodRewriter
}

// handles reports whether the review is a pod CREATE (enforced) or an
// in-place resize (UPDATE pods/resize, checked).
func (m *podMutator) handles(req *admissionRequest[podObject]) bool {
	if req.Resource.Group != "" || req.Resource.Resource != "pods" {
		return false
	}
	return (req.Operation == admissionv1.Create && req.SubResource == "") ||
		(req.Operation == admissionv1.Update && req.SubResource == "resize")
}

func (m *podMutator) mutate(req *admissionRequest[podObject]) ([]patchOp, error) {
	return m.mutatePod(req.Operation, req.Namespace, req.Object.pod())
}

// mutatePod is mutate on a pod holding (at least) the fields of podObject.
func (m *podMutator) mutatePod(op admissionv1.Operation, namespace string, orig *corev1.Pod) ([]patchOp, error) {
	if op == admissionv1.Update {
		return nil, m.checkResize(orig)
	}
	pod := orig.DeepCopy()
	if m.rewriter != nil {
		if err := m.rewriter.RewritePod(namespace, pod); err != nil {
			return nil, &denial{reasons: []string{DenialRewrite}, message: err.Error()}
		}
		if err := rewroteOnlyPatchedFields(orig, pod); err != nil {
			return nil, err
		}
	}
	if _, err := enforcement.Enforce(&pod.Spec, m.names); err != nil {
		var e *enforcement.Error
		if !errors.As(err, &e) {
			return nil, err
		}
		d := &denial{message: err.Error()}
		for _, r := range e.Reasons() {
			d.reasons = append(d.reasons, string(r))
		}
		return nil, d
	}
	return podPatch(orig, pod), nil
}

// podPatch returns the operations turning orig into pod, over the fields a
// PodRewriter and Enforce may change. A changed field or map is replaced
// whole ("add" on an existing member replaces it): the review is of one
// object at one instant, so nothing can race with the patch.
func podPatch(orig, pod *corev1.Pod) []patchOp {
	var ops []patchOp
	if !reflect.DeepEqual(orig.Labels, pod.Labels) {
		ops = append(ops, patchOp{Op: "add", Path: "/metadata/labels", Value: pod.Labels})
	}
	if !reflect.DeepEqual(orig.Annotations, pod.Annotations) {
		ops = append(ops, patchOp{Op: "add", Path: "/metadata/annotations", Value: pod.Annotations})
	}
	if orig.Spec.SchedulerName != pod.Spec.SchedulerName {
		ops = append(ops, patchOp{Op: "add", Path: "/spec/schedulerName", Value: pod.Spec.SchedulerName})
	}
	if orig.Spec.PriorityClassName != pod.Spec.PriorityClassName {
		ops = append(ops, patchOp{Op: "add", Path: "/spec/priorityClassName", Value: pod.Spec.PriorityClassName})
	}
	if !reflect.DeepEqual(orig.Spec.Priority, pod.Spec.Priority) {
		ops = append(ops, patchOp{Op: "add", Path: "/spec/priority", Value: pod.Spec.Priority})
	}
	if !reflect.DeepEqual(orig.Spec.PreemptionPolicy, pod.Spec.PreemptionPolicy) {
		ops = append(ops, patchOp{Op: "add", Path: "/spec/preemptionPolicy", Value: pod.Spec.PreemptionPolicy})
	}
	for _, k := range []struct {
		path       string
		orig, next []corev1.Container
	}{
		{"/spec/initContainers/", orig.Spec.InitContainers, pod.Spec.InitContainers},
		{"/spec/containers/", orig.Spec.Containers, pod.Spec.Containers},
	} {
		for i := range k.next {
			if !reflect.DeepEqual(k.orig[i].Resources, k.next[i].Resources) {
				ops = append(ops, patchOp{Op: "add", Path: k.path + strconv.Itoa(i) + "/resources", Value: k.next[i].Resources})
			}
		}
	}
	return ops
}

// rewroteOnlyPatchedFields checks a rewriter changed nothing podPatch would
// drop.
func rewroteOnlyPatchedFields(orig, pod *corev1.Pod) error {
	if len(orig.Spec.InitContainers) != len(pod.Spec.InitContainers) || len(orig.Spec.Containers) != len(pod.Spec.Containers) {
		return &unprocessedError{kind: ErrRewriteUnpatched, err: errors.New("the pod rewriter added or removed containers")}
	}
	strip := func(p *corev1.Pod) *corev1.Pod {
		c := p.DeepCopy()
		c.Labels, c.Annotations = nil, nil
		c.Spec.SchedulerName, c.Spec.PriorityClassName, c.Spec.Priority, c.Spec.PreemptionPolicy = "", "", nil, nil
		for _, cs := range [][]corev1.Container{c.Spec.InitContainers, c.Spec.Containers} {
			for i := range cs {
				cs[i].Resources = corev1.ResourceRequirements{}
			}
		}
		return c
	}
	if !apiequality.Semantic.DeepEqual(strip(orig), strip(pod)) {
		return &unprocessedError{kind: ErrRewriteUnpatched, err: fmt.Errorf("the pod rewriter changed fields the pod webhook does not patch (only labels, annotations, schedulerName, priorityClassName, priority, preemptionPolicy and container resources are)")}
	}
	return nil
}

// checkResize refuses an in-place resize that takes a reclaimed container
// outside its grant, and allows any other unchanged. The pod was enforced
// when it was created, and kubelet applies a resize to the running
// containers, so a resize raising a native limit above native request +
// reclaimed amount would hand the pod capacity it was never granted; the
// reclaimed amounts themselves cannot be resized (only cpu and memory can).
// The resized pod must pass the same check a stored reclaimed pod does
// (enforcement.Enforced): every native limit within its grant, every native
// request explicit. A resize is not rewritten to fit: the user asked for
// those values, and silently storing others would be worse than a refusal
// that says what fits.
func (m *podMutator) checkResize(pod *corev1.Pod) error {
	err := enforcement.Enforced(&pod.Spec, m.names)
	if err == nil {
		return nil
	}
	var e *enforcement.Error
	if !errors.As(err, &e) {
		return err
	}
	parts := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		// Enforced's advice is for a pod created around the webhook; here
		// the fix is a resize within the grant.
		msg, _, _ := strings.Cut(p.Message, "; create it through")
		p.Message = msg
		parts[i] = p.String()
	}
	return &denial{reasons: []string{DenialResize}, message: "kube-reclaim refuses this resize: a container that uses reclaimed resources must keep " +
		"each native limit within its grant (native request + reclaimed amount) and its native requests explicit: " + strings.Join(parts, "; ")}
}
