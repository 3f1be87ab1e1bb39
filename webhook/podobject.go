package webhook

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// podObject is the slim view of a Pod: the fields the pod mutator, the
// PodRewriter (profiles), package enforcement and
// reclaimable.Names.PodRequest read, and every field podPatch writes back.
// Everything else (env, volumes, images, managedFields, status) is skipped
// by the decoder without being copied, and every array and map is bounded
// (bounded.go). A field read by any of them must be added here and in pod;
// TestSlimPodKeepsWhatTheMutatorReads compares the answers with those of a
// full corev1.Pod.
type podObject struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        podMeta `json:"metadata"`
	Spec            podSpec `json:"spec"`
}

type podMeta struct {
	Name         string            `json:"name"`
	GenerateName string            `json:"generateName"`
	Namespace    string            `json:"namespace"`
	Labels       map[string]string `json:"labels" maxItems:"4096"`
	Annotations  map[string]string `json:"annotations" maxItems:"4096"`
}

type podSpec struct {
	InitContainers    []podContainer           `json:"initContainers" maxItems:"256"`
	Containers        []podContainer           `json:"containers" maxItems:"256"`
	SchedulerName     string                   `json:"schedulerName"`
	PriorityClassName string                   `json:"priorityClassName"`
	Priority          *int32                   `json:"priority"`
	PreemptionPolicy  *corev1.PreemptionPolicy `json:"preemptionPolicy"`
	Overhead          corev1.ResourceList      `json:"overhead" maxItems:"64"`
}

// podContainer keeps the whole of resources (claims too): the patch
// replaces a container's resources whole.
type podContainer struct {
	Name          string                         `json:"name"`
	RestartPolicy *corev1.ContainerRestartPolicy `json:"restartPolicy"`
	Resources     podResources                   `json:"resources"`
}

type podResources struct {
	Limits   corev1.ResourceList    `json:"limits" maxItems:"64"`
	Requests corev1.ResourceList    `json:"requests" maxItems:"64"`
	Claims   []corev1.ResourceClaim `json:"claims" maxItems:"64"`
}

// pod returns the slim object as a corev1.Pod with only its fields set.
func (o *podObject) pod() *corev1.Pod {
	p := &corev1.Pod{
		TypeMeta: o.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: o.Metadata.Name, GenerateName: o.Metadata.GenerateName, Namespace: o.Metadata.Namespace,
			Labels: o.Metadata.Labels, Annotations: o.Metadata.Annotations},
		Spec: corev1.PodSpec{
			InitContainers: containers(o.Spec.InitContainers), Containers: containers(o.Spec.Containers),
			SchedulerName: o.Spec.SchedulerName, PriorityClassName: o.Spec.PriorityClassName,
			Priority: o.Spec.Priority, PreemptionPolicy: o.Spec.PreemptionPolicy, Overhead: o.Spec.Overhead,
		},
	}
	return p
}

func containers(cs []podContainer) []corev1.Container {
	if cs == nil {
		return nil
	}
	out := make([]corev1.Container, len(cs))
	for i, c := range cs {
		out[i] = corev1.Container{Name: c.Name, RestartPolicy: c.RestartPolicy, Resources: corev1.ResourceRequirements{
			Limits: c.Resources.Limits, Requests: c.Resources.Requests, Claims: c.Resources.Claims}}
	}
	return out
}
