package kubectlreclaim

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kube-reclaim/kube-reclaim/internal/policyinput"
	"github.com/kube-reclaim/kube-reclaim/policy"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// The publisher's policy ConfigMap as deploy/ installs it, and its key.
const (
	defaultPolicyConfigMap = "kube-reclaim/kube-reclaim-policy"
	policyConfigMapKey     = "policy.yaml"
)

// SimulateOptions are the flags of `kubectl reclaim simulate [NODE]`.
type SimulateOptions struct {
	*Options
	output *outputFlags

	// PolicyFile is -f; empty means the built-in default policy (or the
	// installed one with FromCluster).
	PolicyFile  string
	FromCluster bool
	ConfigMap   string
	// CompareFile is --compare: a second policy evaluated on the same input.
	CompareFile       string
	Duration          time.Duration
	Interval          time.Duration
	MetricsStaleAfter time.Duration
	StaleAfter        time.Duration
	PodShape          map[string]string
	SortBy            string
	Selector          string
	// Node is the positional argument: explain-level detail for one node.
	Node string
	// History is --history: replay a usage file instead of reading the
	// cluster (simulate_history.go).
	History history
}

func newSimulateCommand(o *Options) *cobra.Command {
	s := &SimulateOptions{Options: o, output: newOutputFlags(true), ConfigMap: defaultPolicyConfigMap,
		Interval: 15 * time.Second, MetricsStaleAfter: reclaimable.DefaultMetricsStaleAfter, StaleAfter: reclaimable.DefaultStaleAfter,
		PodShape: map[string]string{"cpu": "2", "memory": "4Gi"}}
	cmd := &cobra.Command{
		Use:   "simulate [NODE]",
		Short: "What a policy would reclaim on every node, before installing or changing anything",
		Long: `Runs kube-reclaim's policy, the publisher's own code on the publisher's own
input assembly, against the cluster as it is now, and changes nothing: it only
gets and lists nodes, pods and metrics.k8s.io (and, with --from-cluster, the
policy ConfigMap). kube-reclaim need not be installed; metrics-server must be.

Per node it shows allocatable CPU/memory, the usage of regular (not reclaimed)
work the policy counts, what would be reclaimed and, when zero on purpose, why;
when kube-reclaim is installed, what it publishes now and the difference. Then
a summary: total reclaimable CPU and memory, as a share of allocatable and in
"nodes' worth" (total over the mean allocatable of a node), and how many pods of
--pod-shape the reclaimable capacity holds (summed node by node).

Without --duration it reads usage once and says so: the peak over the policy's
window is then just the current usage. With --duration it samples every
--interval for that long (a line per sample, or a bar on a terminal) so the
window has something to take the peak of.

--compare evaluates a second policy file on the same input, side by side.
simulate NODE shows every term of the formula for that node, as explain does.

--history FILE reads no cluster: it replays a CSV of recorded per-pod usage
through the same policy, write gating and eviction controller, step by step,
under -f (the file's default block) and --compare beside two baselines, and
prints per policy the reclaimed share, the violations and the evictions
(docs/design.md, "Replay").`,
		Example: `  # What would the default policy give back on this cluster?
  kubectl reclaim simulate
  # The same with five minutes of usage, largest first.
  kubectl reclaim simulate --duration 5m --interval 15s --sort-by reclaimable-cpu
  # What would my edit of the installed policy change, on every node?
  kubectl reclaim simulate --from-cluster --compare new-policy.yaml
  # Every term for one node, under a policy file.
  kubectl reclaim simulate node-1 -f policy.yaml
  kubectl reclaim simulate -o json --pod-shape cpu=500m,memory=1Gi
  # Replay a month of recorded usage through the default policy and a candidate.
  kubectl reclaim simulate --history usage.csv.gz --node-cpu 32 --node-memory 128Gi --compare new-policy.yaml`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				s.Node = args[0]
			}
			if s.History.File != "" {
				return s.runHistory(cmd.Context())
			}
			if err := s.Validate(); err != nil {
				return err
			}
			return s.Run(cmd.Context())
		},
	}
	s.output.addFlags(cmd)
	fs := cmd.Flags()
	// -f is the policy file; kubectl's -f (filename) has no meaning here.
	fs.StringVarP(&s.PolicyFile, "filename", "f", s.PolicyFile, "Policy file (the publisher's --config format). Default: the built-in default policy.")
	fs.BoolVar(&s.FromCluster, "from-cluster", s.FromCluster, "Use the policy installed in the cluster (--config-map; needs get on that ConfigMap) when there is one, the built-in default otherwise.")
	fs.StringVar(&s.ConfigMap, "config-map", s.ConfigMap, "namespace/name of the installed policy ConfigMap (key "+policyConfigMapKey+"), read with --from-cluster.")
	fs.StringVar(&s.CompareFile, "compare", s.CompareFile, "A second policy file, evaluated on the same input and shown beside the first.")
	fs.DurationVar(&s.Duration, "duration", s.Duration, "Sample usage for this long before evaluating (e.g. 5m); 0 reads usage once.")
	fs.DurationVar(&s.Interval, "interval", s.Interval, "Time between two usage samples with --duration (metrics-server measures every 10-60s).")
	fs.DurationVar(&s.MetricsStaleAfter, "metrics-stale-after", s.MetricsStaleAfter, "As the publisher's flag: a node whose newest usage sample is older gets zero.")
	fs.DurationVar(&s.StaleAfter, "stale-after", s.StaleAfter, "A published annotation written longer ago than this counts as zero (as in the webhook and the extender).")
	fs.StringToStringVar(&s.PodShape, "pod-shape", s.PodShape, "The pod the summary counts: how many of cpu=...,memory=... the reclaimable capacity holds.")
	fs.StringVar(&s.SortBy, "sort-by", s.SortBy, "Sort the rows by one of: "+strings.Join(simulateSortKeys.names(), ", ")+
		". Values sort largest first, name and ties alphabetically.")
	fs.StringVarP(&s.Selector, "selector", "l", s.Selector, "Label selector of the nodes (like kubectl get -l).")
	s.History.addFlags(fs)
	return cmd
}

// Validate reports every invalid flag at once, before any API call.
func (s *SimulateOptions) Validate() error {
	errs := s.validateCommon()
	if err := s.output.validate(); err != nil {
		errs = append(errs, err)
	}
	if s.FromCluster && s.PolicyFile != "" {
		errs = append(errs, errors.New("-f and --from-cluster cannot be used together"))
	}
	if s.FromCluster {
		if _, _, err := splitNamespacedName(s.ConfigMap); err != nil {
			errs = append(errs, fmt.Errorf("--config-map: %w", err))
		}
	}
	if s.Duration < 0 {
		errs = append(errs, fmt.Errorf("--duration: %s must not be negative", s.Duration))
	}
	if s.Interval < time.Second {
		errs = append(errs, fmt.Errorf("--interval: %s must be at least 1s", s.Interval))
	}
	if s.MetricsStaleAfter <= 0 {
		errs = append(errs, fmt.Errorf("--metrics-stale-after: %s must be positive", s.MetricsStaleAfter))
	}
	if s.StaleAfter <= 0 {
		errs = append(errs, fmt.Errorf("--stale-after: %s must be positive", s.StaleAfter))
	}
	if _, err := parsePodShape(s.PodShape); err != nil {
		errs = append(errs, fmt.Errorf("--pod-shape: %w", err))
	}
	if err := simulateSortKeys.validate(s.SortBy); err != nil {
		errs = append(errs, err)
	}
	if _, err := labels.Parse(s.Selector); err != nil {
		errs = append(errs, fmt.Errorf("--selector: %w", err))
	}
	if s.Selector != "" && s.Node != "" {
		errs = append(errs, errors.New("a node name and --selector cannot be used together"))
	}
	return errors.Join(errs...)
}

func splitNamespacedName(s string) (string, string, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return "", "", fmt.Errorf("want namespace/name, got %q", s)
	}
	return ns, name, nil
}

// parsePodShape reads --pod-shape: cpu and/or memory quantities.
func parsePodShape(shape map[string]string) (reclaimable.Resources, error) {
	var r reclaimable.Resources
	for k, v := range shape {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return r, fmt.Errorf("%s: %w", k, err)
		}
		if q.Sign() < 0 {
			return r, fmt.Errorf("%s: %s is negative", k, v)
		}
		switch k {
		case "cpu":
			r.CPUMilli = q.MilliValue()
		case "memory":
			r.MemoryBytes = q.Value()
		default:
			return r, fmt.Errorf("unknown resource %q (cpu or memory)", k)
		}
	}
	if r.IsZero() {
		return r, errors.New("the shape requests nothing")
	}
	return r, nil
}

// SimulationReport is the json/yaml document of `kubectl reclaim simulate`.
type SimulationReport struct {
	metav1.TypeMeta `json:",inline"`
	// Time is the evaluation instant.
	Time time.Time `json:"time"`
	// Policy says where the policy came from; Compare, the second one.
	Policy  string `json:"policy"`
	Compare string `json:"compare,omitempty"`
	// Samples is the number of times usage was read; Note says what that
	// means for the result.
	Samples  int    `json:"samples"`
	Duration string `json:"duration"`
	Note     string `json:"note,omitempty"`
	// Installed is true when some node carries a published annotation.
	Installed bool                  `json:"installed"`
	PodShape  reclaimable.Resources `json:"podShape"`
	Items     []SimulatedNode       `json:"items"`
	Summary   SimulationSummary     `json:"summary"`
	// CompareSummary is the summary under the --compare policy.
	CompareSummary *SimulationSummary `json:"compareSummary,omitempty"`
}

// SimulatedNode is one node of the simulation.
type SimulatedNode struct {
	Name string `json:"name"`
	// Allocatable is the node's native allocatable cpu and memory.
	Allocatable reclaimable.Resources `json:"allocatable"`
	// NodeSamples is the number of usage samples of the node the policy saw.
	NodeSamples int `json:"nodeSamples"`
	// Held is the sum of the reclaimed requests of the node's live pods.
	Held            reclaimable.Resources `json:"held"`
	SimulatedResult `json:",inline"`
	// Published is what kube-reclaim publishes now (the annotation's values
	// when fresh, zero when stale); absent when the node has no annotation.
	Published      *reclaimable.Resources `json:"published,omitempty"`
	PublishedStale string                 `json:"publishedStale,omitempty"`
	// Difference is Reclaimable - Published.
	Difference *reclaimable.Resources `json:"difference,omitempty"`
	// Compare is the result under the --compare policy; its Change is
	// Compare.Reclaimable - Reclaimable.
	Compare *SimulatedResult `json:"compare,omitempty"`
}

// SimulatedResult is what one policy computes for one node.
type SimulatedResult struct {
	Policy string `json:"policy"`
	Pool   string `json:"pool,omitempty"`
	// RegularUsage is the usage of regular (not reclaimed) work the policy
	// subtracted (its peak over the window); absent when the policy does not
	// read usage or had none.
	RegularUsage *reclaimable.Resources `json:"regularUsage,omitempty"`
	Reclaimable  reclaimable.Resources  `json:"reclaimable"`
	ZeroReason   string                 `json:"zeroReason,omitempty"`
	// Change is set on a --compare result: its Reclaimable minus the first
	// policy's.
	Change *reclaimable.Resources `json:"change,omitempty"`
	// Explanation is every term of the formula (simulate NODE only).
	Explanation *reclaimable.Explanation `json:"explanation,omitempty"`
	// PodsFit is how many pods of the --pod-shape fit in Reclaimable.
	PodsFit int64 `json:"podsFit"`
}

// SimulationSummary totals one policy over the nodes.
type SimulationSummary struct {
	Nodes       int                   `json:"nodes"`
	Allocatable reclaimable.Resources `json:"allocatable"`
	Reclaimable reclaimable.Resources `json:"reclaimable"`
	// Percent of allocatable that is reclaimable.
	CPUPercent    float64 `json:"cpuPercent"`
	MemoryPercent float64 `json:"memoryPercent"`
	// NodesWorth is reclaimable over the mean allocatable of a node.
	CPUNodesWorth    float64 `json:"cpuNodesWorth"`
	MemoryNodesWorth float64 `json:"memoryNodesWorth"`
	// PodsFit is the sum over nodes of the --pod-shape pods each holds.
	PodsFit int64 `json:"podsFit"`
	// ZeroNodes counts the nodes at zero on purpose, by reason.
	ZeroNodes []ReasonCount `json:"zeroNodes,omitempty"`
}

// ReasonCount is a number of nodes with one zero reason.
type ReasonCount struct {
	Reason string `json:"reason"`
	Nodes  int    `json:"nodes"`
}

// loadedPolicy is a policy configuration and where it came from.
type loadedPolicy struct {
	cfg    *policy.Config
	source string
}

// Run reads the policies, samples usage, evaluates every node and prints.
func (s *SimulateOptions) Run(ctx context.Context) error {
	names, _ := s.names()
	shape, _ := parsePodShape(s.PodShape)
	// Broken files fail before anything is read from the cluster.
	var main loadedPolicy
	var err error
	if s.PolicyFile != "" {
		main, err = policyFromFile(s.PolicyFile)
		if err != nil {
			return err
		}
	}
	var cmp *loadedPolicy
	if s.CompareFile != "" {
		p, err := policyFromFile(s.CompareFile)
		if err != nil {
			return fmt.Errorf("--compare: %w", err)
		}
		cmp = &p
	}
	c, err := s.clients()
	if err != nil {
		return err
	}
	switch {
	case s.FromCluster:
		if main, err = s.policyFromCluster(ctx, c); err != nil {
			return err
		}
	case s.PolicyFile == "":
		main = loadedPolicy{cfg: policy.Default(), source: "built-in default"}
	}
	if c.Metrics == nil {
		return errors.New("metrics.k8s.io: no client could be built for it; simulate needs metrics-server (kubectl top nodes must work)")
	}
	// An unknown node or a selector matching nothing is known before the wait.
	nodes, err := s.nodes(ctx, c)
	if err != nil {
		return err
	}

	age := policyinput.HistoryAge(main.cfg, s.MetricsStaleAfter)
	if cmp != nil {
		age = max(age, policyinput.HistoryAge(cmp.cfg, s.MetricsStaleAfter))
	}
	a := policyinput.New(names)
	a.Resize(max(age, s.Duration+s.MetricsStaleAfter), min(s.Interval, policyinput.MinScrapeInterval))
	samples, err := s.sample(ctx, c, a)
	if err != nil {
		return err
	}
	if s.Duration > 0 {
		// Nodes come and go while sampling: evaluate those there now.
		if nodes, err = s.nodes(ctx, c); err != nil {
			return err
		}
	}
	pods, err := s.pods(ctx, c, nodes, names)
	if err != nil {
		return err
	}
	now := s.Now()
	r := &SimulationReport{TypeMeta: typeMeta("Simulation"), Time: now, Policy: main.source, Samples: samples,
		Duration: s.Duration.String(), PodShape: shape, Items: make([]SimulatedNode, 0, len(nodes))}
	if s.Duration == 0 {
		r.Note = "one usage sample (no --duration): the peak over the policy's window is the usage of this instant; " +
			"sample for a while (--duration 5m) for a value the publisher would keep"
	}
	if cmp != nil {
		r.Compare = cmp.source
	}
	var calc policy.Calculator
	for i := range nodes {
		node := &nodes[i]
		in, held := a.Node(node.Name, policyinput.Resources(node.Status.Capacity), policyinput.Resources(node.Status.Allocatable), pods[node.Name])
		n := SimulatedNode{Name: node.Name, Allocatable: in.Allocatable, NodeSamples: len(in.Samples), Held: held}
		n.SimulatedResult = evaluate(&calc, &in, node, main.cfg, now, s.MetricsStaleAfter, shape, s.Node != "")
		if cmp != nil {
			res := evaluate(&calc, &in, node, cmp.cfg, now, s.MetricsStaleAfter, shape, s.Node != "")
			res.Change = &reclaimable.Resources{CPUMilli: res.Reclaimable.CPUMilli - n.Reclaimable.CPUMilli,
				MemoryBytes: res.Reclaimable.MemoryBytes - n.Reclaimable.MemoryBytes}
			n.Compare = &res
		}
		if value, ok := node.Annotations[names.Annotation]; ok {
			r.Installed = true
			f := reclaimable.Judge(value, true, now, s.StaleAfter, true)
			pub := f.Values
			n.Published = &pub
			if !f.Fresh {
				n.PublishedStale = f.Reason
			}
			n.Difference = &reclaimable.Resources{CPUMilli: n.Reclaimable.CPUMilli - pub.CPUMilli, MemoryBytes: n.Reclaimable.MemoryBytes - pub.MemoryBytes}
		}
		r.Items = append(r.Items, n)
	}
	r.Summary = summarize(r.Items, func(n *SimulatedNode) *SimulatedResult { return &n.SimulatedResult })
	if cmp != nil {
		sum := summarize(r.Items, func(n *SimulatedNode) *SimulatedResult { return n.Compare })
		r.CompareSummary = &sum
	}
	if err := simulateSortKeys.sort(r.Items, s.SortBy, func(r *SimulatedNode) string { return r.Name }); err != nil {
		return err
	}

	if s.output.machineReadable() {
		return s.output.printDocument(s.Streams.Out, r)
	}
	if s.output.format() == outputName {
		return s.output.printTable(s.Streams.Out, simulateTable(r), false)
	}
	if s.Node != "" && len(r.Items) == 1 {
		return writeSimulatedNode(s.Streams.Out, r, &r.Items[0])
	}
	if err := s.output.printTable(s.Streams.Out, simulateTable(r), false); err != nil {
		return err
	}
	return writeSummary(s.Streams.Out, r)
}

func policyFromFile(path string) (loadedPolicy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return loadedPolicy{}, fmt.Errorf("reading policy file: %w", err)
	}
	cfg, err := policy.Load(data)
	if err != nil {
		return loadedPolicy{}, fmt.Errorf("policy file %s: %w", path, err)
	}
	return loadedPolicy{cfg: cfg, source: "file " + path}, nil
}

// policyFromCluster reads the installed policy; no ConfigMap means the
// publisher runs with the built-in default.
func (s *SimulateOptions) policyFromCluster(ctx context.Context, c Clients) (loadedPolicy, error) {
	ns, name, _ := splitNamespacedName(s.ConfigMap)
	cm, err := c.Kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return loadedPolicy{cfg: policy.Default(), source: fmt.Sprintf("built-in default (no ConfigMap %s)", s.ConfigMap)}, nil
	case err != nil:
		return loadedPolicy{}, fmt.Errorf("--from-cluster: reading ConfigMap %s: %w", s.ConfigMap, err)
	}
	data, ok := cm.Data[policyConfigMapKey]
	if !ok {
		return loadedPolicy{}, fmt.Errorf("--from-cluster: ConfigMap %s has no key %s", s.ConfigMap, policyConfigMapKey)
	}
	cfg, err := policy.Load([]byte(data))
	if err != nil {
		return loadedPolicy{}, fmt.Errorf("--from-cluster: the policy in ConfigMap %s is invalid (the publisher keeps its last good policy): %w", s.ConfigMap, err)
	}
	return loadedPolicy{cfg: cfg, source: "ConfigMap " + s.ConfigMap}, nil
}

// nodes reads the named node, or the nodes the selector matches.
func (s *SimulateOptions) nodes(ctx context.Context, c Clients) ([]corev1.Node, error) {
	if s.Node != "" {
		node, err := c.Kube.CoreV1().Nodes().Get(ctx, s.Node, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		return []corev1.Node{*node}, nil
	}
	var nodes []corev1.Node
	p := c.pager(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return c.Kube.CoreV1().Nodes().List(ctx, opts)
	})
	err := p.EachListItemWithAlloc(ctx, metav1.ListOptions{LabelSelector: s.Selector}, func(obj runtime.Object) error {
		nodes = append(nodes, *obj.(*corev1.Node))
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing nodes: %w", err)
	}
	if len(nodes) == 0 {
		return nil, errors.New("no nodes found")
	}
	return nodes, nil
}

// pods reads the non-terminal pods bound to the nodes, by node, as the
// publisher keeps them.
func (s *SimulateOptions) pods(ctx context.Context, c Clients, nodes []corev1.Node, names reclaimable.Names) (map[string][]*policyinput.Pod, error) {
	want := make(map[string]bool, len(nodes))
	for i := range nodes {
		want[nodes[i].Name] = true
	}
	sel := fields.ParseSelectorOrDie(policyinput.NonTerminalPods)
	if len(nodes) == 1 {
		sel = fields.AndSelectors(sel, fields.OneTermEqualSelector("spec.nodeName", nodes[0].Name))
	}
	out := map[string][]*policyinput.Pod{}
	p := c.pager(func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
		return c.Kube.CoreV1().Pods(metav1.NamespaceAll).List(ctx, opts)
	})
	err := p.EachListItemWithAlloc(ctx, metav1.ListOptions{FieldSelector: sel.String()}, func(obj runtime.Object) error {
		pod := obj.(*corev1.Pod)
		if want[pod.Spec.NodeName] {
			out[pod.Spec.NodeName] = append(out[pod.Spec.NodeName], policyinput.NewPod(names, pod))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("listing pods: %w", err)
	}
	return out, nil
}

// sample reads NodeMetrics and PodMetrics once, or every --interval for
// --duration, into a. The first reading must succeed: without usage there is
// nothing to simulate. A later failure is reported and sampling goes on, as
// the publisher does.
func (s *SimulateOptions) sample(ctx context.Context, c Clients, a *policyinput.Assembler) (int, error) {
	total := 1
	if s.Duration > 0 {
		total = int(s.Duration/s.Interval) + 1
	}
	progress := newProgress(s.Streams.ErrOut, total, s.Duration > 0)
	taken := 0
	for i := 1; i <= total; i++ {
		if i > 1 {
			if err := sleep(ctx, s.Interval); err != nil {
				return taken, err
			}
		}
		nodes, pods, err := readMetrics(ctx, c, a)
		if err != nil {
			if taken == 0 {
				progress.done()
				return 0, fmt.Errorf("metrics.k8s.io: %w; simulate needs metrics-server (kubectl top nodes must work)", err)
			}
			progress.warn(i, err)
			continue
		}
		taken++
		progress.step(i, nodes, pods)
	}
	progress.done()
	return taken, nil
}

// readMetrics adds one reading and returns how many node and pod samples
// were new.
func readMetrics(ctx context.Context, c Clients, a *policyinput.Assembler) (int, int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	nodes, err := a.ReadNodeMetrics(ctx, c.Metrics, metav1.ListOptions{})
	if err != nil {
		return 0, 0, err
	}
	pods, err := a.ReadPodMetrics(ctx, c.Metrics)
	return nodes, pods, err
}

// sleep waits between samples; tests replace it.
var sleep = func(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// progress reports sampling on stderr: a bar redrawn in place on a
// terminal, a line per sample otherwise (logs, CI).
type progress struct {
	out      io.Writer
	total    int
	enabled  bool
	terminal bool
}

func newProgress(out io.Writer, total int, enabled bool) *progress {
	p := &progress{out: out, total: total, enabled: enabled}
	if f, ok := out.(*os.File); ok {
		p.terminal = term.IsTerminal(int(f.Fd()))
	}
	return p
}

func (p *progress) step(i, nodes, pods int) {
	if !p.enabled {
		return
	}
	if p.terminal {
		const width = 30
		filled := i * width / p.total
		fmt.Fprintf(p.out, "\rSampling usage [%s%s] %d/%d", strings.Repeat("#", filled), strings.Repeat(" ", width-filled), i, p.total)
		return
	}
	fmt.Fprintf(p.out, "sample %d/%d: %d new node samples, %d new pod samples\n", i, p.total, nodes, pods)
}

func (p *progress) warn(i int, err error) {
	if p.terminal && p.enabled {
		fmt.Fprintln(p.out)
	}
	fmt.Fprintf(p.out, "Warning: sample %d/%d: metrics.k8s.io: %v; continuing\n", i, p.total, err)
}

func (p *progress) done() {
	if p.terminal && p.enabled {
		fmt.Fprintln(p.out)
	}
}

// evaluate runs cfg's policy for the node, as the publisher's cycle does.
func evaluate(calc *policy.Calculator, in *policy.Node, node *corev1.Node, cfg *policy.Config, now time.Time,
	metricsStaleAfter time.Duration, shape reclaimable.Resources, explain bool) SimulatedResult {
	settings, pool := cfg.For(node.Labels)
	res := calc.Compute(in, settings, now, metricsStaleAfter)
	r := SimulatedResult{Policy: string(res.Policy), Pool: pool, Reclaimable: res.Resources, ZeroReason: res.ZeroReason,
		PodsFit: podsFit(res.Resources, shape)}
	cpu, okCPU := termValue(res.Explanation.CPU, policy.TermRegularPeakUsage)
	mem, okMem := termValue(res.Explanation.Memory, policy.TermRegularPeakUsage)
	if okCPU && okMem {
		r.RegularUsage = &reclaimable.Resources{CPUMilli: cpu, MemoryBytes: mem}
	}
	if explain {
		e := res.Explanation
		r.Explanation = &e
	}
	return r
}

func termValue(re reclaimable.ResourceExplanation, name string) (int64, bool) {
	for _, t := range re.Terms {
		if t.Name == name {
			return t.Value, true
		}
	}
	return 0, false
}

// podsFit is how many pods of shape fit in r; a zero component of the shape
// does not limit.
func podsFit(r, shape reclaimable.Resources) int64 {
	fit := int64(-1)
	if shape.CPUMilli > 0 {
		fit = r.CPUMilli / shape.CPUMilli
	}
	if shape.MemoryBytes > 0 {
		m := r.MemoryBytes / shape.MemoryBytes
		if fit < 0 || m < fit {
			fit = m
		}
	}
	return max(fit, 0)
}

func summarize(items []SimulatedNode, result func(*SimulatedNode) *SimulatedResult) SimulationSummary {
	s := SimulationSummary{Nodes: len(items)}
	zero := map[string]int{}
	for i := range items {
		n := &items[i]
		r := result(n)
		s.Allocatable = s.Allocatable.Add(n.Allocatable)
		s.Reclaimable = s.Reclaimable.Add(r.Reclaimable)
		s.PodsFit += r.PodsFit
		if r.ZeroReason != "" {
			zero[r.ZeroReason]++
		}
	}
	ratio := func(part, whole int64) float64 {
		if whole <= 0 {
			return 0
		}
		return float64(part) / float64(whole)
	}
	s.CPUPercent = 100 * ratio(s.Reclaimable.CPUMilli, s.Allocatable.CPUMilli)
	s.MemoryPercent = 100 * ratio(s.Reclaimable.MemoryBytes, s.Allocatable.MemoryBytes)
	// Total over the mean node is the share times the node count.
	s.CPUNodesWorth = float64(s.Nodes) * s.CPUPercent / 100
	s.MemoryNodesWorth = float64(s.Nodes) * s.MemoryPercent / 100
	for reason, n := range zero {
		s.ZeroNodes = append(s.ZeroNodes, ReasonCount{Reason: reason, Nodes: n})
	}
	slices.SortFunc(s.ZeroNodes, func(a, b ReasonCount) int { return strings.Compare(a.Reason, b.Reason) })
	return s
}

// Sort keys of simulate --sort-by, like those of nodes.
var simulateSortKeys = sortKeys[SimulatedNode]{
	"reclaimable-cpu":    func(n *SimulatedNode) (int64, bool) { return n.Reclaimable.CPUMilli, true },
	"reclaimable-memory": func(n *SimulatedNode) (int64, bool) { return n.Reclaimable.MemoryBytes, true },
	"allocatable-cpu":    func(n *SimulatedNode) (int64, bool) { return n.Allocatable.CPUMilli, true },
	"allocatable-memory": func(n *SimulatedNode) (int64, bool) { return n.Allocatable.MemoryBytes, true },
	"usage-cpu": func(n *SimulatedNode) (int64, bool) {
		if n.RegularUsage == nil {
			return 0, false
		}
		return n.RegularUsage.CPUMilli, true
	},
	"usage-memory": func(n *SimulatedNode) (int64, bool) {
		if n.RegularUsage == nil {
			return 0, false
		}
		return n.RegularUsage.MemoryBytes, true
	},
	"difference-cpu": func(n *SimulatedNode) (int64, bool) {
		if n.Difference == nil {
			return 0, false
		}
		return n.Difference.CPUMilli, true
	},
	"difference-memory": func(n *SimulatedNode) (int64, bool) {
		if n.Difference == nil {
			return 0, false
		}
		return n.Difference.MemoryBytes, true
	},
	"change-cpu": func(n *SimulatedNode) (int64, bool) {
		if n.Compare == nil {
			return 0, false
		}
		return n.Compare.Change.CPUMilli, true
	},
	"change-memory": func(n *SimulatedNode) (int64, bool) {
		if n.Compare == nil {
			return 0, false
		}
		return n.Compare.Change.MemoryBytes, true
	},
}

// simulateColumns are the table's columns; the published and compare
// columns appear only when there is something to show.
func simulateColumns(r *SimulationReport) []metav1.TableColumnDefinition {
	cols := []metav1.TableColumnDefinition{
		{Name: "Name", Type: "string", Format: "name", Description: "Name of the node."},
		{Name: "Allocatable", Type: "string", Description: "Native allocatable cpu/memory."},
		{Name: "Regular-Usage", Type: "string", Description: "Usage of regular (not reclaimed) work the policy subtracts: its peak over the window; - when the policy does not read usage."},
		{Name: "Reclaimable", Type: "string", Description: "What the policy would publish."},
		{Name: "Zero-Reason", Type: "string", Description: "Why the policy publishes zero on purpose; empty otherwise."},
	}
	if r.Installed {
		cols = append(cols,
			metav1.TableColumnDefinition{Name: "Published", Type: "string", Description: "What kube-reclaim publishes now (0/0 when stale); <none> without annotation."},
			metav1.TableColumnDefinition{Name: "Difference", Type: "string", Description: "Reclaimable minus published."})
	}
	if r.Compare != "" {
		cols = append(cols,
			metav1.TableColumnDefinition{Name: "Compare", Type: "string", Description: "What the --compare policy would publish."},
			metav1.TableColumnDefinition{Name: "Change", Type: "string", Description: "Compare minus reclaimable."})
	}
	return append(cols,
		metav1.TableColumnDefinition{Name: "Policy", Type: "string", Priority: 1, Description: "Policy (and pool) of the node."},
		metav1.TableColumnDefinition{Name: "Samples", Type: "integer", Priority: 1, Description: "Usage samples of the node the policy saw."},
		metav1.TableColumnDefinition{Name: "Pods-Fit", Type: "integer", Priority: 1, Description: "Pods of --pod-shape the reclaimable capacity holds."})
}

func simulateTable(r *SimulationReport) *metav1.Table {
	t := &metav1.Table{ColumnDefinitions: simulateColumns(r), Rows: make([]metav1.TableRow, 0, len(r.Items))}
	opt := func(p *reclaimable.Resources) string {
		if p == nil {
			return "-"
		}
		return pair(*p)
	}
	for i := range r.Items {
		n := &r.Items[i]
		cells := []any{n.Name, pair(n.Allocatable), opt(n.RegularUsage), pair(n.Reclaimable), n.ZeroReason}
		if r.Installed {
			pub := "<none>"
			if n.Published != nil {
				pub = pair(*n.Published)
				if n.PublishedStale != "" {
					pub += " (stale)"
				}
			}
			cells = append(cells, pub, signedPair(n.Difference))
		}
		if r.Compare != "" {
			cells = append(cells, pair(n.Compare.Reclaimable), signedPair(n.Compare.Change))
		}
		pol := n.Policy
		if n.Pool != "" {
			pol += " (pool " + n.Pool + ")"
		}
		cells = append(cells, pol, int64(n.NodeSamples), n.PodsFit)
		t.Rows = append(t.Rows, metav1.TableRow{Cells: cells, Object: rowObject("Node", "", n.Name)})
	}
	return t
}

// signedPair renders a difference with its sign: +500m/-1Gi.
func signedPair(d *reclaimable.Resources) string {
	if d == nil {
		return "-"
	}
	sign := func(s string, v int64) string {
		if v > 0 {
			return "+" + s
		}
		return s
	}
	return sign(FormatCPU(d.CPUMilli), d.CPUMilli) + "/" + sign(FormatMemory(d.MemoryBytes), d.MemoryBytes)
}

// writeSummary writes the cluster summary below the table.
func writeSummary(out io.Writer, r *SimulationReport) error {
	out = textWriter{out}
	fmt.Fprintf(out, "\nPolicy: %s\n", r.Policy)
	if r.Compare != "" {
		fmt.Fprintf(out, "Compare: %s\n", r.Compare)
	}
	fmt.Fprintf(out, "Usage: %s\n", sampleWords(r))
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "\nSUMMARY\t%s", "POLICY")
	if r.CompareSummary != nil {
		fmt.Fprintf(w, "\tCOMPARE")
	}
	fmt.Fprintln(w)
	rows := []struct {
		label string
		cell  func(*SimulationSummary) string
	}{
		{"nodes", func(s *SimulationSummary) string { return fmt.Sprint(s.Nodes) }},
		{"allocatable", func(s *SimulationSummary) string { return pair(s.Allocatable) }},
		{"reclaimable", func(s *SimulationSummary) string { return pair(s.Reclaimable) }},
		{"share of allocatable", func(s *SimulationSummary) string {
			return fmt.Sprintf("cpu %.1f%%, memory %.1f%%", s.CPUPercent, s.MemoryPercent)
		}},
		{"nodes' worth", func(s *SimulationSummary) string {
			return fmt.Sprintf("cpu %.1f, memory %.1f", s.CPUNodesWorth, s.MemoryNodesWorth)
		}},
		{"pods of " + pair(r.PodShape), func(s *SimulationSummary) string { return fmt.Sprint(s.PodsFit) }},
		{"zero on purpose", func(s *SimulationSummary) string {
			if len(s.ZeroNodes) == 0 {
				return "none"
			}
			parts := make([]string, 0, len(s.ZeroNodes))
			for _, z := range s.ZeroNodes {
				parts = append(parts, fmt.Sprintf("%d %s", z.Nodes, z.Reason))
			}
			return strings.Join(parts, ", ")
		}},
	}
	for _, row := range rows {
		fmt.Fprintf(w, "%s\t%s", row.label, row.cell(&r.Summary))
		if r.CompareSummary != nil {
			fmt.Fprintf(w, "\t%s", row.cell(r.CompareSummary))
		}
		fmt.Fprintln(w)
	}
	return w.Flush()
}

func sampleWords(r *SimulationReport) string {
	if r.Note != "" {
		return r.Note
	}
	return fmt.Sprintf("%d samples over %s", r.Samples, r.Duration)
}

// writeSimulatedNode renders one node with every term, as explain does.
func writeSimulatedNode(out io.Writer, r *SimulationReport, n *SimulatedNode) error {
	out = textWriter{out}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintf(w, "Node:\t%s\n", n.Name)
	fmt.Fprintf(w, "Policy:\t%s, from %s\n", policyWords(&n.SimulatedResult), r.Policy)
	fmt.Fprintf(w, "Usage:\t%s\n", sampleWords(r))
	fmt.Fprintf(w, "Node samples:\t%d in the history\n", n.NodeSamples)
	fmt.Fprintf(w, "Allocatable:\tcpu %s, memory %s\n", FormatCPU(n.Allocatable.CPUMilli), memoryExact(n.Allocatable.MemoryBytes))
	fmt.Fprintf(w, "Reclaimable:\tcpu %s, memory %s%s\n", FormatCPU(n.Reclaimable.CPUMilli), memoryExact(n.Reclaimable.MemoryBytes), zeroWords(n.ZeroReason))
	if !n.Held.IsZero() {
		fmt.Fprintf(w, "Held:\tcpu %s, memory %s (reclaimed pods on the node)\n", FormatCPU(n.Held.CPUMilli), memoryExact(n.Held.MemoryBytes))
	}
	if n.Published != nil {
		stale := ""
		if n.PublishedStale != "" {
			stale = " (stale: " + n.PublishedStale + ")"
		}
		fmt.Fprintf(w, "Published now:\tcpu %s, memory %s%s; difference %s\n", FormatCPU(n.Published.CPUMilli), memoryExact(n.Published.MemoryBytes), stale, signedPair(n.Difference))
	}
	if n.Compare != nil {
		fmt.Fprintf(w, "Compare:\tcpu %s, memory %s%s under %s (%s); change %s\n", FormatCPU(n.Compare.Reclaimable.CPUMilli),
			memoryExact(n.Compare.Reclaimable.MemoryBytes), zeroWords(n.Compare.ZeroReason), policyWords(n.Compare), r.Compare, signedPair(n.Compare.Change))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, res := range []*SimulatedResult{&n.SimulatedResult, n.Compare} {
		if res == nil || res.Explanation == nil {
			continue
		}
		if n.Compare != nil {
			fmt.Fprintf(out, "\n--- %s\n", policyWords(res))
		}
		writeTerms(out, "CPU", res.Explanation.CPU, FormatCPU)
		writeTerms(out, "Memory", res.Explanation.Memory, memoryExact)
	}
	return nil
}

func policyWords(r *SimulatedResult) string {
	if r.Pool != "" {
		return fmt.Sprintf("%s (pool %q)", r.Policy, r.Pool)
	}
	return r.Policy
}

func zeroWords(reason string) string {
	if reason == "" {
		return ""
	}
	return " (zero on purpose: " + reason + ")"
}

// DeepCopyObject implements runtime.Object.
func (r *SimulationReport) DeepCopyObject() runtime.Object {
	if r == nil {
		return nil
	}
	c := *r
	if r.Items != nil {
		c.Items = make([]SimulatedNode, len(r.Items))
		for i := range r.Items {
			c.Items[i] = r.Items[i].deepCopy()
		}
	}
	c.Summary = r.Summary.deepCopy()
	if r.CompareSummary != nil {
		s := r.CompareSummary.deepCopy()
		c.CompareSummary = &s
	}
	return &c
}

func (n *SimulatedNode) deepCopy() SimulatedNode {
	c := *n
	c.SimulatedResult = n.SimulatedResult.deepCopy()
	c.Published = copyRequest(n.Published)
	c.Difference = copyRequest(n.Difference)
	if n.Compare != nil {
		r := n.Compare.deepCopy()
		c.Compare = &r
	}
	return c
}

func (r *SimulatedResult) deepCopy() SimulatedResult {
	c := *r
	c.RegularUsage = copyRequest(r.RegularUsage)
	c.Change = copyRequest(r.Change)
	if e := r.Explanation; e != nil {
		c.Explanation = &reclaimable.Explanation{
			CPU:    reclaimable.ResourceExplanation{Terms: slices.Clone(e.CPU.Terms), Result: e.CPU.Result},
			Memory: reclaimable.ResourceExplanation{Terms: slices.Clone(e.Memory.Terms), Result: e.Memory.Result},
		}
	}
	return c
}

func (s *SimulationSummary) deepCopy() SimulationSummary {
	c := *s
	c.ZeroNodes = slices.Clone(s.ZeroNodes)
	return c
}
