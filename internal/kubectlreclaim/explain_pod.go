package kubectlreclaim

import (
	"context"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-reclaim/kube-reclaim/enforcement"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// podArg returns NAME for an argument "pod/NAME" (also pods/, po/).
func podArg(arg string) (string, bool) {
	kind, name, ok := strings.Cut(arg, "/")
	if !ok || name == "" {
		return "", false
	}
	switch kind {
	case "pod", "pods", "po":
		return name, true
	}
	return "", false
}

// PodExplainReport is the json/yaml document of `kubectl reclaim explain pod/NAME`.
type PodExplainReport struct {
	metav1.TypeMeta `json:",inline"`
	Namespace       string `json:"namespace"`
	Name            string `json:"name"`
	// OptedIn is true when the pod carries the opt-in label with "true".
	OptedIn bool `json:"optedIn"`
	// OptedOut is true when the opt-out annotation is "true".
	OptedOut bool `json:"optedOut,omitempty"`
	// ProfileReport as in `kubectl reclaim pods`.
	ProfileReport `json:",inline"`
	// Requested is the pod's effective reclaimed request.
	Requested         reclaimable.Resources `json:"requested"`
	Scheduler         string                `json:"scheduler"`
	PriorityClassName string                `json:"priorityClassName,omitempty"`
	Priority          *int32                `json:"priority,omitempty"`
	// Enforced is true when kubelet holds every reclaimed container to its
	// grant (enforcement.Enforced); EnforcementProblem says what is missing.
	Enforced           bool   `json:"enforced"`
	EnforcementProblem string `json:"enforcementProblem,omitempty"`
	// Containers are the native and reclaimed resources as stored.
	Containers []ContainerResources `json:"containers"`
}

// ContainerResources is one container's resources in a PodExplainReport.
type ContainerResources struct {
	Name     string              `json:"name"`
	Init     bool                `json:"init,omitempty"`
	Requests corev1.ResourceList `json:"requests,omitempty"`
	Limits   corev1.ResourceList `json:"limits,omitempty"`
}

func podExplainReport(pod *corev1.Pod, names reclaimable.Names) *PodExplainReport {
	req, _ := names.PodRequest(pod)
	r := &PodExplainReport{
		TypeMeta: typeMeta("PodExplanation"), Namespace: pod.Namespace, Name: pod.Name,
		OptedIn:   pod.Labels[names.ReclaimedLabel] == "true",
		OptedOut:  pod.Annotations[names.OptOut] == "true",
		Requested: req, Scheduler: schedulerName(pod),
		PriorityClassName: pod.Spec.PriorityClassName, Priority: pod.Spec.Priority,
	}
	r.ProfileReport = profileOf(pod, names)
	if err := enforcement.Enforced(&pod.Spec, names); err != nil {
		r.EnforcementProblem = err.Error()
	} else {
		r.Enforced = true
	}
	for i, cs := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range cs {
			r.Containers = append(r.Containers, ContainerResources{Name: c.Name, Init: i == 0, Requests: c.Resources.Requests, Limits: c.Resources.Limits})
		}
	}
	return r
}

// explainPod explains how kube-reclaim changed a pod: the profile, what it
// rewrote, and whether kubelet enforces the grant.
func (e *ExplainOptions) explainPod(ctx context.Context, name string) error {
	names, _ := e.names()
	ns, err := (&PodsOptions{Options: e.Options}).namespace()
	if err != nil {
		return err
	}
	c, err := e.clients()
	if err != nil {
		return err
	}
	pod, err := c.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	r := podExplainReport(pod, names)
	if e.output.machineReadable() {
		return e.output.printDocument(e.Streams.Out, r)
	}
	return writePodExplain(e.Streams.Out, r, names)
}

func writePodExplain(out io.Writer, r *PodExplainReport, names reclaimable.Names) error {
	out = textWriter{out}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "Pod:\t%s/%s\n", r.Namespace, r.Name)
	switch {
	case r.Profile != "":
		fmt.Fprintf(w, "Profile:\t%s: its native cpu/memory requests were rewritten into reclaimed requests\n", r.Profile)
		if r.RewriteError != "" {
			fmt.Fprintf(w, "Rewritten:\tunreadable (%s)\n", r.RewriteError)
		}
		for i, cn := range r.Rewritten.Containers() {
			label := ""
			if i == 0 {
				label = "Rewritten:"
			}
			fmt.Fprintf(w, "%s\t%s: cpu %s, memory %s\n", label, cn, FormatCPU(r.Rewritten[cn].CPUMilli), FormatMemory(r.Rewritten[cn].MemoryBytes))
		}
	case r.OptedIn && r.OptedOut:
		fmt.Fprintf(w, "Profile:\t<none>: labelled %s=true but opted out (%s=true)\n", names.ReclaimedLabel, names.OptOut)
	case r.Requested.IsZero():
		fmt.Fprintf(w, "Profile:\t<none>: a regular pod (no reclaimed request; opt in with the label %s=true)\n", names.ReclaimedLabel)
	default:
		fmt.Fprintf(w, "Profile:\t<none>: the pod requests reclaimed resources itself\n")
	}
	fmt.Fprintf(w, "Reclaimed:\tcpu %s, memory %s (the pod's effective request)\n", FormatCPU(r.Requested.CPUMilli), FormatMemory(r.Requested.MemoryBytes))
	switch {
	case r.Requested.IsZero():
	case r.Enforced:
		fmt.Fprintf(w, "Enforced:\tyes: native limits are the grant, native requests explicit (kubelet caps CPU and memory)\n")
	default:
		fmt.Fprintf(w, "Enforced:\tNO: %s\n", oneLine(r.EnforcementProblem))
	}
	fmt.Fprintf(w, "Scheduler:\t%s\n", r.Scheduler)
	if r.PriorityClassName != "" || r.Priority != nil {
		p := "<unset>"
		if r.Priority != nil {
			p = fmt.Sprint(*r.Priority)
		}
		fmt.Fprintf(w, "Priority:\t%s (class %s)\n", p, orNone(r.PriorityClassName))
	}
	for i, c := range r.Containers {
		label := ""
		if i == 0 {
			label = "Containers:"
		}
		kind := ""
		if c.Init {
			kind = " (init)"
		}
		fmt.Fprintf(w, "%s\t%s%s: requests %s; limits %s\n", label, c.Name, kind, formatList(c.Requests, names), formatList(c.Limits, names))
	}
	return w.Flush()
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// formatList shows cpu and memory, native then reclaimed, in the plugin's units.
func formatList(l corev1.ResourceList, names reclaimable.Names) string {
	var parts []string
	for _, k := range []struct {
		name  corev1.ResourceName
		label string
		cpu   bool
	}{{corev1.ResourceCPU, "cpu", true}, {corev1.ResourceMemory, "memory", false}, {names.CPU, "reclaimed-cpu", true}, {names.Memory, "reclaimed-memory", false}} {
		q, ok := l[k.name]
		if !ok {
			continue
		}
		v := FormatMemory(q.Value())
		if k.cpu && k.name == corev1.ResourceCPU {
			v = FormatCPU(q.MilliValue())
		} else if k.cpu {
			v = FormatCPU(q.Value()) // reclaimed-cpu counts millicores
		}
		parts = append(parts, k.label+" "+v)
	}
	if len(parts) == 0 {
		return "<none>"
	}
	return strings.Join(parts, ", ")
}
