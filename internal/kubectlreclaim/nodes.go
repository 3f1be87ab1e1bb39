package kubectlreclaim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// NodeReport is one node of `kubectl reclaim nodes`.
type NodeReport struct {
	Name string `json:"name"`
	// Room is what the extender schedules against now: the annotation's
	// values when it is fresh, zero otherwise.
	Room reclaimable.Resources `json:"room"`
	// Held is the sum of the reclaimed requests of the node's non-terminal
	// pods.
	Held reclaimable.Resources `json:"held"`
	// Floor is the status value the rule asks for, per resource
	// max(Room, Held): what kubelet admits against, never below what the
	// running reclaimed pods hold (see docs/design.md#two-numbers-per-node).
	Floor reclaimable.Resources `json:"floor"`
	// OverRoom is true when Held exceeds Room in either resource: the node's
	// reclaimed pods hold more than it can offer now.
	OverRoom bool `json:"overRoom"`
	// Free is Room - Held; negative when the node is over room.
	Free reclaimable.Resources `json:"free"`
	// ReclaimedPods is the number of non-terminal pods requesting reclaimed
	// resources on the node.
	ReclaimedPods int `json:"reclaimedPods"`
	// Usage is the node usage from metrics.k8s.io; absent when unavailable.
	Usage     *reclaimable.Resources `json:"usage,omitempty"`
	UsageTime *time.Time             `json:"usageTime,omitempty"`
	// Fresh is the staleness verdict (reclaimable.Judge) at the report time.
	Fresh       bool   `json:"fresh"`
	StaleReason string `json:"staleReason,omitempty"`
	StaleDetail string `json:"staleDetail,omitempty"`
	// Annotation is the parsed annotation, without its explanation.
	Annotation *AnnotationReport `json:"annotation,omitempty"`
	// Capacity and Allocatable are the reclaimed resources in the node's status.
	Capacity    reclaimable.Resources `json:"capacity"`
	Allocatable reclaimable.Resources `json:"allocatable"`
}

// AnnotationReport is the node annotation as kubectl reclaim shows it.
type AnnotationReport struct {
	reclaimable.Resources `json:",inline"`
	Policy                string `json:"policy"`
	Pool                  string `json:"pool,omitempty"`
	// MetricsTime is absent when no usage sample was used (request policy).
	MetricsTime *time.Time `json:"metricsTime,omitempty"`
	WriteTime   time.Time  `json:"writeTime"`
	ZeroReason  string     `json:"zeroReason,omitempty"`
	// Held is what the annotation says reclaimed pods held when it was
	// written; absent when it does not say.
	Held *reclaimable.Resources `json:"held,omitempty"`
}

// NodeList is the json/yaml document of `kubectl reclaim nodes`.
type NodeList struct {
	metav1.TypeMeta `json:",inline"`
	// Time is the instant staleness was judged at.
	Time       time.Time `json:"time"`
	StaleAfter string    `json:"staleAfter"`
	// UsageAvailable is false when metrics.k8s.io could not be read;
	// UsageError says why.
	UsageAvailable bool   `json:"usageAvailable"`
	UsageError     string `json:"usageError,omitempty"`
	// PublisherLease is the publisher's leader Lease, when checked.
	PublisherLease *LeaseReport `json:"publisherLease,omitempty"`
	Items          []NodeReport `json:"items"`
}

// nodeUsage is one NodeMetrics.
type nodeUsage struct {
	reclaimable.Resources
	Time time.Time
}

// buildNodeReport computes one node's row from the node, the reclaimed
// requests of its pods and its usage (nil when unknown).
func buildNodeReport(node *corev1.Node, names reclaimable.Names, requested reclaimable.Resources, pods int,
	usage *nodeUsage, now time.Time, staleAfter time.Duration, lease *LeaseReport) NodeReport {
	value, present := node.Annotations[names.Annotation]
	f := judge(value, present, now, staleAfter, lease)
	r := NodeReport{
		Name:          node.Name,
		Room:          f.Room,
		Held:          requested,
		Floor:         f.Room.Max(requested),
		ReclaimedPods: pods,
		Fresh:         f.Fresh,
		StaleReason:   f.Reason,
		StaleDetail:   f.Detail,
		Capacity:      statusResources(node.Status.Capacity, names),
		Allocatable:   statusResources(node.Status.Allocatable, names),
	}
	r.Free = reclaimable.Resources{CPUMilli: r.Room.CPUMilli - r.Held.CPUMilli, MemoryBytes: r.Room.MemoryBytes - r.Held.MemoryBytes}
	r.OverRoom = r.Free.CPUMilli < 0 || r.Free.MemoryBytes < 0
	if a := f.Annotation; a != nil {
		r.Annotation = &AnnotationReport{Resources: reclaimable.Resources{CPUMilli: a.CPUMilli, MemoryBytes: a.MemoryBytes},
			Policy: a.Policy, Pool: a.Pool, WriteTime: a.WriteTime, ZeroReason: a.ZeroReason, Held: a.Held}
		if !a.MetricsTime.IsZero() {
			t := a.MetricsTime
			r.Annotation.MetricsTime = &t
		}
	}
	if usage != nil {
		u, t := usage.Resources, usage.Time
		r.Usage, r.UsageTime = &u, &t
	}
	return r
}

func statusResources(l corev1.ResourceList, names reclaimable.Names) reclaimable.Resources {
	return reclaimable.Resources{CPUMilli: quantity(l, names.CPU), MemoryBytes: quantity(l, names.Memory)}
}

func quantity(l corev1.ResourceList, name corev1.ResourceName) int64 {
	if q, ok := l[name]; ok {
		return q.Value()
	}
	return 0
}

// status is the STATUS cell: Fresh, Zero: <why the publisher published
// zero>, or Stale: <why the value is not trusted>, followed by ",OverRoom"
// (like kubectl's "Ready,SchedulingDisabled") when pods hold more than the
// room.
func (r *NodeReport) status() string {
	s := "Fresh"
	switch {
	case !r.Fresh:
		s = "Stale: " + r.StaleReason
	case r.Annotation != nil && r.Annotation.ZeroReason != "":
		s = "Zero: " + r.Annotation.ZeroReason
	}
	if r.OverRoom {
		s += ",OverRoom"
	}
	return s
}

func (r *NodeReport) policy() string {
	switch {
	case r.Annotation == nil:
		return "<none>"
	case r.Annotation.Pool != "":
		return r.Annotation.Policy + " (pool " + r.Annotation.Pool + ")"
	}
	return r.Annotation.Policy
}

// Sort keys of --sort-by. name sorts ascending; every other key sorts
// largest first (like kubectl top), ties by name, rows without the value last.
var nodeSortKeys = joinKeys(
	resourceKeys("room", func(r *NodeReport) *reclaimable.Resources { return &r.Room }),
	resourceKeys("held", func(r *NodeReport) *reclaimable.Resources { return &r.Held }),
	resourceKeys("free", func(r *NodeReport) *reclaimable.Resources { return &r.Free }),
	resourceKeys("usage", func(r *NodeReport) *reclaimable.Resources { return r.Usage }),
	sortKeys[NodeReport]{
		"pods": func(r *NodeReport) (int64, bool) { return int64(r.ReclaimedPods), true },
		// age: oldest annotation first.
		"age": func(r *NodeReport) (int64, bool) {
			if r.Annotation == nil {
				return 0, false
			}
			return -r.Annotation.WriteTime.UnixNano(), true
		},
	},
)

// nodeColumns are the columns of `kubectl reclaim nodes`; -o wide adds
// those of priority 1: the annotated values, the reclaimed resources in
// status.capacity and status.allocatable, and the age of the usage sample
// the values were computed from and of the current metrics.k8s.io sample.
var nodeColumns = []metav1.TableColumnDefinition{
	{Name: "Name", Type: "string", Format: "name", Description: "Name of the node."},
	{Name: "Room", Type: "string", Description: "Reclaimed cpu/memory the extender schedules against: the annotation's values when fresh, 0/0 otherwise."},
	{Name: "Held", Type: "string", Description: "Reclaimed cpu/memory requested by the node's non-terminal pods."},
	{Name: "Floor", Type: "string", Description: "Status value kubelet admits against: per resource max(room, held), never below what running pods hold."},
	{Name: "Free", Type: "string", Description: "Room minus held; negative when the node is over room."},
	{Name: "Usage", Type: "string", Description: "Node usage from metrics.k8s.io; - when unavailable."},
	{Name: "Pods", Type: "integer", Description: "Non-terminal pods requesting reclaimed resources on the node."},
	{Name: "Policy", Type: "string", Description: "Policy (and pool) that computed the annotation."},
	{Name: "Status", Type: "string", Description: "Fresh, Zero: <why the publisher published zero> or Stale: <why the room counts as zero>; \",OverRoom\" when held exceeds the room."},
	{Name: "Age", Type: "string", Description: "Time since the publisher wrote the annotation."},
	{Name: "Annotated", Type: "string", Priority: 1, Description: "Values in the annotation, whether fresh or not."},
	{Name: "Annotated-Held", Type: "string", Priority: 1, Description: "What the annotation says reclaimed pods held when it was written; the webhook's floor."},
	{Name: "Capacity", Type: "string", Priority: 1, Description: "Reclaimed resources in status.capacity."},
	{Name: "Allocatable", Type: "string", Priority: 1, Description: "Reclaimed resources in status.allocatable."},
	{Name: "Metrics-Age", Type: "string", Priority: 1, Description: "Age of the usage sample the annotation was computed from."},
	{Name: "Usage-Age", Type: "string", Priority: 1, Description: "Age of the current metrics.k8s.io sample."},
}

// nodesTable renders the list as a metav1.Table for the cli-runtime printers.
func nodesTable(list *NodeList) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: nodeColumns, Rows: make([]metav1.TableRow, 0, len(list.Items))}
	for i := range list.Items {
		r := &list.Items[i]
		usage, usageAge := "-", "-"
		if r.Usage != nil {
			usage = pair(*r.Usage)
			usageAge = age(list.Time, *r.UsageTime)
		}
		writeAge, annotated, annotatedHeld, metricsAge := "<none>", "<none>", "<none>", "<none>"
		if a := r.Annotation; a != nil {
			writeAge = age(list.Time, a.WriteTime)
			annotated = pair(a.Resources)
			if a.Held != nil {
				annotatedHeld = pair(*a.Held)
			}
			if a.MetricsTime != nil {
				metricsAge = age(list.Time, *a.MetricsTime)
			}
		}
		t.Rows = append(t.Rows, metav1.TableRow{
			Cells: []any{r.Name, pair(r.Room), pair(r.Held), pair(r.Floor), pair(r.Free), usage,
				int64(r.ReclaimedPods), r.policy(), r.status(), writeAge,
				annotated, annotatedHeld, pair(r.Capacity), pair(r.Allocatable), metricsAge, usageAge},
			Object: rowObject("Node", "", r.Name),
		})
	}
	return t
}

// NodesOptions are the flags of `kubectl reclaim nodes`.
type NodesOptions struct {
	*Options
	freshnessFlags
	output   *outputFlags
	SortBy   string
	Selector string
	// NodeNames are the positional arguments; every node when empty.
	NodeNames []string
}

func newNodesCommand(o *Options) *cobra.Command {
	n := &NodesOptions{Options: o, freshnessFlags: defaultFreshness(), output: newOutputFlags(true)}
	cmd := &cobra.Command{
		Use:   "nodes [NAME...]",
		Short: "Room, held, floor and free reclaimed CPU/memory of every node",
		Long: `Shows, per node, two numbers kept apart:

  ROOM   what the extender schedules new reclaimed pods against: the published
         values, zero when the annotation is stale (the reason is in STATUS);
  FLOOR  what the node status carries and kubelet admits against: per resource
         max(ROOM, HELD), so a kubelet restart never rejects running pods;

with HELD the reclaimed requests of the pods on the node, FREE = ROOM - HELD
(negative when the node is over room), the node usage from metrics.k8s.io
("-" when that API is unavailable), the policy and pool, and the age of the
annotation.

STATUS is Fresh, "Zero: <reason>" when the publisher published zero on purpose
(metrics-stale, no-samples, invalid-settings), or "Stale: <reason>" when the
webhook and the extender count the room as zero (annotation-missing,
annotation-malformed, annotation-too-old, annotation-from-future, and
publisher-lease-expired when the publisher's leader Lease was not renewed for
two lease durations), followed by ",OverRoom" when HELD exceeds ROOM.`,
		Example: `  kubectl reclaim nodes
  kubectl reclaim nodes -l node-pool=batch --sort-by free-cpu
  kubectl reclaim nodes -o wide
  kubectl reclaim nodes node-1 -o json
  kubectl reclaim nodes --sort-by free-cpu -o name | head -3`,
		RunE: func(cmd *cobra.Command, args []string) error {
			n.NodeNames = args
			if err := n.Validate(); err != nil {
				return err
			}
			return n.Run(cmd.Context())
		},
	}
	n.output.addFlags(cmd)
	fs := cmd.Flags()
	fs.StringVar(&n.SortBy, "sort-by", n.SortBy, "Sort the rows by one of: "+strings.Join(nodeSortKeys.names(), ", ")+
		". Values sort largest first, name and ties alphabetically.")
	fs.StringVarP(&n.Selector, "selector", "l", n.Selector, "Label selector of the nodes (like kubectl get -l), e.g. -l 'pool=batch,!gpu'.")
	n.addFlags(fs)
	return cmd
}

// Validate reports every invalid flag at once.
func (n *NodesOptions) Validate() error {
	errs := n.validateCommon()
	if err := n.output.validate(); err != nil {
		errs = append(errs, err)
	}
	if err := nodeSortKeys.validate(n.SortBy); err != nil {
		errs = append(errs, err)
	}
	if _, err := labels.Parse(n.Selector); err != nil {
		errs = append(errs, fmt.Errorf("--selector: %w", err))
	}
	if n.Selector != "" && len(n.NodeNames) > 0 {
		errs = append(errs, errors.New("node names and --selector cannot be used together"))
	}
	errs = append(errs, n.validate()...)
	return errors.Join(errs...)
}

// Run collects and prints the report.
func (n *NodesOptions) Run(ctx context.Context) error {
	names, _ := n.names()
	c, err := n.clients()
	if err != nil {
		return err
	}
	now := n.Now()
	lease, err := n.leaderLease(ctx, c.Kube, now)
	if err != nil {
		fmt.Fprintf(n.Streams.ErrOut, "Warning: %v; not taken into account.\n", err)
	}
	list, err := collectNodes(ctx, c, names, n.NodeNames, n.Selector, now, n.StaleAfter, lease)
	if err != nil {
		return err
	}
	if err := nodeSortKeys.sort(list.Items, n.SortBy, func(r *NodeReport) string { return r.Name }); err != nil {
		return err
	}
	if n.output.machineReadable() {
		return n.output.printDocument(n.Streams.Out, list)
	}
	if len(list.Items) == 0 {
		fmt.Fprintln(n.Streams.ErrOut, "No nodes found.")
		return nil
	}
	if !list.UsageAvailable && n.output.humanReadable() {
		fmt.Fprintf(n.Streams.ErrOut, "Warning: node usage unavailable (%s); USAGE shows \"-\".\n", list.UsageError)
	}
	return n.output.printTable(n.Streams.Out, nodesTable(list), false)
}

// collectNodes reads the nodes, the pods and the node metrics.
func collectNodes(ctx context.Context, c Clients, names reclaimable.Names, nodeNames []string, selector string,
	now time.Time, staleAfter time.Duration, lease *LeaseReport) (*NodeList, error) {
	var nodes []corev1.Node
	if len(nodeNames) > 0 {
		for _, name := range nodeNames {
			node, err := c.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return nil, err
			}
			nodes = append(nodes, *node)
		}
	} else {
		p := c.pager(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return c.Kube.CoreV1().Nodes().List(ctx, opts)
		})
		err := p.EachListItemWithAlloc(ctx, metav1.ListOptions{LabelSelector: selector}, func(obj runtime.Object) error {
			nodes = append(nodes, *obj.(*corev1.Node))
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("listing nodes: %w", err)
		}
	}

	want := make(map[string]bool, len(nodes))
	for i := range nodes {
		want[nodes[i].Name] = true
	}
	podSelector := fields.AndSelectors(
		fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
		fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed)))
	if len(nodes) == 1 {
		podSelector = fields.AndSelectors(podSelector, fields.OneTermEqualSelector("spec.nodeName", nodes[0].Name))
	}
	requested := map[string]reclaimable.Resources{}
	count := map[string]int{}
	if len(nodes) > 0 {
		p := c.pager(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return c.Kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
		})
		// Only sums are kept, so the pages need not outlive the loop.
		err := p.EachListItem(ctx, metav1.ListOptions{FieldSelector: podSelector.String()}, func(obj runtime.Object) error {
			pod := obj.(*corev1.Pod)
			if !want[pod.Spec.NodeName] || isTerminal(pod) {
				return nil
			}
			if r, _ := names.PodRequest(pod); !r.IsZero() {
				requested[pod.Spec.NodeName] = requested[pod.Spec.NodeName].Add(r)
				count[pod.Spec.NodeName]++
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("listing pods: %w", err)
		}
	}

	list := &NodeList{TypeMeta: typeMeta("NodeList"), Time: now, StaleAfter: staleAfter.String(), PublisherLease: lease,
		Items: make([]NodeReport, 0, len(nodes))}
	usage, err := nodeUsages(ctx, c, selector)
	if err != nil {
		list.UsageError = err.Error()
	} else {
		list.UsageAvailable = true
	}
	for i := range nodes {
		name := nodes[i].Name
		var u *nodeUsage
		if m, ok := usage[name]; ok {
			u = &m
		}
		list.Items = append(list.Items, buildNodeReport(&nodes[i], names, requested[name], count[name], u, now, staleAfter, lease))
	}
	return list, nil
}

func isTerminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

// nodeUsages reads NodeMetrics; an error means the metrics API is not
// usable, which callers report but never fail on.
func nodeUsages(ctx context.Context, c Clients, selector string) (map[string]nodeUsage, error) {
	if c.Metrics == nil {
		return nil, errors.New("no metrics.k8s.io client")
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	// A List, even for named nodes: a Get of a node without metrics yet
	// would look like an unavailable API.
	list, err := c.Metrics.MetricsV1beta1().NodeMetricses().List(ctx, metav1.ListOptions{LabelSelector: selector})
	if err != nil {
		return nil, fmt.Errorf("metrics.k8s.io: %w", err)
	}
	out := make(map[string]nodeUsage, len(list.Items))
	for i := range list.Items {
		m := &list.Items[i]
		out[m.Name] = nodeUsage{
			Resources: reclaimable.Resources{CPUMilli: m.Usage.Cpu().MilliValue(), MemoryBytes: m.Usage.Memory().Value()},
			Time:      m.Timestamp.Time,
		}
	}
	return out, nil
}
