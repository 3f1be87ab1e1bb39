package kubectlreclaim

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// PodReport is one pod of `kubectl reclaim pods`.
type PodReport struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Node is empty while the pod is not bound.
	Node  string `json:"node,omitempty"`
	Phase string `json:"phase"`
	// Requested is the pod's effective reclaimed request (reclaimable.Names.PodRequest).
	Requested reclaimable.Resources `json:"requested"`
	// LimitsMismatch is true when a container's reclaimed request differs from
	// its limit: such a pod cannot use reclaimed capacity.
	LimitsMismatch bool `json:"limitsMismatch,omitempty"`
	// Waiting says why an unbound pod waits: the last FailedScheduling event,
	// else the PodScheduled condition.
	Waiting string `json:"waiting,omitempty"`
	// Scheduler is the pod's spec.schedulerName.
	Scheduler     string    `json:"scheduler"`
	Created       time.Time `json:"created"`
	ProfileReport `json:",inline"`
}

// ProfileReport says which profile rewrote a pod's native requests into
// reclaimed ones, and what it moved.
type ProfileReport struct {
	// Profile names the profile (the webhook's annotation), empty when none
	// did.
	Profile string `json:"profile,omitempty"`
	// Rewritten is what the profile moved, per container.
	Rewritten reclaimable.ProfileRewrite `json:"rewritten,omitempty"`
	// RewriteError says why the rewrite record cannot be read.
	RewriteError string `json:"rewriteError,omitempty"`
}

// PodList is the json/yaml document of `kubectl reclaim pods`.
type PodList struct {
	metav1.TypeMeta `json:",inline"`
	Items           []PodReport `json:"items"`
}

// buildPodReport computes one pod's row; event is the pod's last
// FailedScheduling event, nil when none.
func buildPodReport(pod *corev1.Pod, names reclaimable.Names, event *corev1.Event) PodReport {
	req, mismatch := names.PodRequest(pod)
	r := PodReport{
		Namespace:      pod.Namespace,
		Name:           pod.Name,
		Node:           pod.Spec.NodeName,
		Phase:          string(pod.Status.Phase),
		Requested:      req,
		LimitsMismatch: mismatch,
		Scheduler:      schedulerName(pod),
		Created:        pod.CreationTimestamp.Time,
	}
	r.ProfileReport = profileOf(pod, names)
	if r.Phase == "" {
		r.Phase = string(corev1.PodPending)
	}
	if pod.DeletionTimestamp != nil {
		r.Phase = "Terminating"
	}
	if r.Node == "" && !isTerminal(pod) {
		r.Waiting = waitingReason(pod, event)
	}
	return r
}

func waitingReason(pod *corev1.Pod, event *corev1.Event) string {
	if event != nil && event.Message != "" {
		return event.Message
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse && c.Message != "" {
			return c.Message
		}
	}
	return fmt.Sprintf("no scheduling attempt recorded yet; is the scheduler %q running?", schedulerName(pod))
}

func schedulerName(pod *corev1.Pod) string {
	if pod.Spec.SchedulerName == "" {
		return corev1.DefaultSchedulerName
	}
	return pod.Spec.SchedulerName
}

// eventTime is the last time an event was observed.
func eventTime(e *corev1.Event) time.Time {
	t := e.LastTimestamp.Time
	for _, c := range []time.Time{e.EventTime.Time, e.FirstTimestamp.Time} {
		if c.After(t) {
			t = c
		}
	}
	if e.Series != nil && e.Series.LastObservedTime.After(t) {
		t = e.Series.LastObservedTime.Time
	}
	return t
}

// lastEvents keeps the newest FailedScheduling event per involved pod UID.
func lastEvents(events []corev1.Event) map[types.UID]*corev1.Event {
	out := map[types.UID]*corev1.Event{}
	for i := range events {
		e := &events[i]
		if e.Reason != "FailedScheduling" || e.InvolvedObject.Kind != "Pod" {
			continue
		}
		if prev, ok := out[e.InvolvedObject.UID]; !ok || eventTime(e).After(eventTime(prev)) {
			out[e.InvolvedObject.UID] = e
		}
	}
	return out
}

// podColumns are the columns of `kubectl reclaim pods`; -o wide adds the
// scheduler, and -A the namespace (from the row's object).
var podColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: "Name of the pod."},
	{Name: "Node", Type: "string", Description: "Node the pod is bound to; <none> while it waits."},
	{Name: "CPU", Type: "string", Description: "Reclaimed CPU the pod requests."},
	{Name: "Memory", Type: "string", Description: "Reclaimed memory the pod requests."},
	{Name: "Phase", Type: "string", Description: "Pod phase; Terminating once deleted."},
	{Name: "Age", Type: "string", Description: "Time since the pod was created."},
	{Name: "Profile", Type: "string", Description: "The profile that rewrote the pod's native requests into reclaimed ones; <none> when the pod asked for them itself."},
	{Name: "Message", Type: "string", Description: "Why an unbound pod waits (the last FailedScheduling event), or why it cannot use reclaimed capacity."},
	{Name: "Scheduler", Type: "string", Priority: 1, Description: "The pod's scheduler (spec.schedulerName)."},
	{Name: "Rewritten", Type: "string", Priority: 1, Description: "What the profile rewrote: each container's native cpu/memory requests, now its reclaimed grant."},
}

func podsTable(list *PodList, now time.Time) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: podColumns, Rows: make([]metav1.TableRow, 0, len(list.Items))}
	for i := range list.Items {
		p := &list.Items[i]
		node := p.Node
		if node == "" {
			node = "<none>"
		}
		msg := p.Waiting
		if p.LimitsMismatch {
			msg = join("reclaimed requests differ from limits: the pod cannot use reclaimed capacity", msg)
		}
		profile := p.Profile
		if profile == "" {
			profile = "<none>"
		}
		if p.RewriteError != "" {
			msg = join(p.RewriteError, msg)
		}
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells: []any{p.Name, node, FormatCPU(p.Requested.CPUMilli), FormatMemory(p.Requested.MemoryBytes), p.Phase,
				age(now, p.Created), profile, oneLine(msg), p.Scheduler, formatRewrite(p.Rewritten)},
			Object: rowObject("Pod", p.Namespace, p.Name),
		})
	}
	return t
}

// profileOf reads the webhook's profile annotations.
func profileOf(pod *corev1.Pod, names reclaimable.Names) ProfileReport {
	r := ProfileReport{Profile: pod.Annotations[names.Profile]}
	raw, ok := pod.Annotations[names.ProfileRewrite]
	if r.Profile == "" || !ok {
		return r
	}
	rec, err := reclaimable.ParseProfileRewrite(raw)
	if err != nil {
		r.RewriteError = fmt.Sprintf("%s: %v", names.ProfileRewrite, err)
		return r
	}
	r.Rewritten = rec
	return r
}

// formatRewrite is "app=500m/1Gi,init=1/64Mi": container=cpu/memory.
func formatRewrite(rec reclaimable.ProfileRewrite) string {
	if len(rec) == 0 {
		return "<none>"
	}
	parts := make([]string, 0, len(rec))
	for _, c := range rec.Containers() {
		parts = append(parts, c+"="+FormatCPU(rec[c].CPUMilli)+"/"+FormatMemory(rec[c].MemoryBytes))
	}
	return strings.Join(parts, ",")
}

func join(a, b string) string {
	if b == "" {
		return a
	}
	return a + "; " + b
}

// oneLine keeps a whole scheduler message on its row: the table printer
// cuts a cell at its first newline, and a tab would shift the columns.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// PodsOptions are the flags of `kubectl reclaim pods`.
type PodsOptions struct {
	*Options
	output        *outputFlags
	Selector      string
	AllNamespaces bool
}

func newPodsCommand(o *Options) *cobra.Command {
	p := &PodsOptions{Options: o, output: newOutputFlags(true)}
	cmd := &cobra.Command{
		Use:   "pods",
		Short: "The pods using reclaimed resources, where they run or why they wait",
		Long: `Lists the pods that request the reclaimed resources, with their node (or, for a
pod not yet bound, the last FailedScheduling message), their reclaimed CPU and
memory requests, and their phase. The namespace comes from -n or the current
context; -A lists every namespace.`,
		Example: `  kubectl reclaim pods -A
  kubectl reclaim pods -n batch -l app=train -o yaml
  kubectl reclaim pods -A -o wide --no-headers`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := p.Validate(); err != nil {
				return err
			}
			return p.Run(cmd.Context())
		},
	}
	p.output.addFlags(cmd)
	fs := cmd.Flags()
	fs.StringVarP(&p.Selector, "selector", "l", p.Selector, "Label selector of the pods, e.g. -l app=train.")
	fs.BoolVarP(&p.AllNamespaces, "all-namespaces", "A", p.AllNamespaces, "List the pods of every namespace.")
	return cmd
}

// Validate reports every invalid flag at once.
func (p *PodsOptions) Validate() error {
	errs := p.validateCommon()
	if err := p.output.validate(); err != nil {
		errs = append(errs, err)
	}
	if _, err := labels.Parse(p.Selector); err != nil {
		errs = append(errs, fmt.Errorf("--selector: %w", err))
	}
	return errors.Join(errs...)
}

func (p *PodsOptions) namespace() (string, error) {
	if p.AllNamespaces {
		return metav1.NamespaceAll, nil
	}
	if p.ConfigFlags.Namespace != nil && *p.ConfigFlags.Namespace != "" {
		return *p.ConfigFlags.Namespace, nil
	}
	ns, _, err := p.ConfigFlags.ToRawKubeConfigLoader().Namespace()
	return ns, err
}

// Run collects and prints the pods.
func (p *PodsOptions) Run(ctx context.Context) error {
	names, _ := p.names()
	ns, err := p.namespace()
	if err != nil {
		return err
	}
	c, err := p.clients()
	if err != nil {
		return err
	}
	list, err := collectPods(ctx, c, names, ns, p.Selector)
	if err != nil {
		return err
	}
	if p.output.machineReadable() {
		return p.output.printDocument(p.Streams.Out, list)
	}
	if len(list.Items) == 0 {
		if ns == "" {
			fmt.Fprintln(p.Streams.ErrOut, "No reclaimed pods found.")
		} else {
			fmt.Fprintf(p.Streams.ErrOut, "No reclaimed pods found in namespace %s.\n", ns)
		}
		return nil
	}
	return p.output.printTable(p.Streams.Out, podsTable(list, p.Now()), p.AllNamespaces)
}

func collectPods(ctx context.Context, c Clients, names reclaimable.Names, ns, selector string) (*PodList, error) {
	var reclaimed []*corev1.Pod
	pending := false
	pods := c.pager(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return c.Kube.CoreV1().Pods(ns).List(ctx, opts)
	})
	// WithAlloc: the reclaimed pods are kept, not the pages.
	err := pods.EachListItemWithAlloc(ctx, metav1.ListOptions{LabelSelector: selector}, func(obj runtime.Object) error {
		pod := obj.(*corev1.Pod)
		if names.IsReclaimedPod(pod) {
			reclaimed = append(reclaimed, pod)
			pending = pending || (pod.Spec.NodeName == "" && !isTerminal(pod))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	var events map[types.UID]*corev1.Event
	if pending {
		sel := fields.AndSelectors(fields.OneTermEqualSelector("reason", "FailedScheduling"),
			fields.OneTermEqualSelector("involvedObject.kind", "Pod"))
		var list []corev1.Event
		p := c.pager(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return c.Kube.CoreV1().Events(ns).List(ctx, opts)
		})
		err := p.EachListItem(ctx, metav1.ListOptions{FieldSelector: sel.String()}, func(obj runtime.Object) error {
			list = append(list, *obj.(*corev1.Event))
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("listing FailedScheduling events: %w", err)
		}
		events = lastEvents(list)
	}
	out := &PodList{TypeMeta: typeMeta("PodList"), Items: make([]PodReport, 0, len(reclaimed))}
	for _, pod := range reclaimed {
		out.Items = append(out.Items, buildPodReport(pod, names, events[pod.UID]))
	}
	slices.SortFunc(out.Items, func(a, b PodReport) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out, nil
}
