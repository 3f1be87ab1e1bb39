package kubectlreclaim

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kube-reclaim/kube-reclaim/internal/policyfile"
	"github.com/kube-reclaim/kube-reclaim/internal/policyinput"
	"github.com/kube-reclaim/kube-reclaim/policy"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// loadedPolicy is a policy configuration and where it came from.
type loadedPolicy struct {
	cfg    *policy.Config
	source string
	// warnings are what loading said of a file that still loaded (an
	// unversioned one, for example), printed before the report.
	warnings []string
}

// warn prints the warnings of each policy loaded, as the publisher logs them.
func (s *SimulateOptions) warn(ps ...*loadedPolicy) {
	for _, p := range ps {
		if p == nil {
			continue
		}
		for _, w := range p.warnings {
			fmt.Fprintf(s.Streams.ErrOut, "Warning: policy from %s: %s\n", p.source, w)
		}
	}
}

// Run reads the policies, samples usage, evaluates every node and prints.
func (s *SimulateOptions) Run(ctx context.Context) error {
	names, _ := s.names()
	shape, _ := parsePodShape(s.PodShape)
	// Broken files fail before anything is read from the cluster.
	main, cmp, err := s.policyFiles()
	if err != nil {
		return err
	}
	c, err := s.clients()
	if err != nil {
		return err
	}
	if s.FromCluster {
		if main, err = s.policyFromCluster(ctx, c); err != nil {
			return err
		}
	}
	s.warn(&main, cmp)
	if c.Metrics == nil {
		return errors.New("metrics.k8s.io: no client could be built for it; simulate needs metrics-server (kubectl top nodes must work)")
	}
	in, err := s.readCluster(ctx, c, names, main, cmp)
	if err != nil {
		return err
	}
	r := s.simulate(in, names, main, cmp, shape)
	if err := simulateSortKeys.sort(r.Items, s.SortBy, func(r *SimulatedNode) string { return r.Name }); err != nil {
		return err
	}
	return s.print(r)
}

// policyFiles loads -f (the built-in default without it) and --compare
// (nil without it).
func (s *SimulateOptions) policyFiles() (main loadedPolicy, cmp *loadedPolicy, err error) {
	main = loadedPolicy{cfg: policy.Default(), source: "built-in default"}
	if s.PolicyFile != "" {
		if main, err = policyFromFile(s.PolicyFile); err != nil {
			return main, nil, err
		}
	}
	if s.CompareFile != "" {
		p, err := policyFromFile(s.CompareFile)
		if err != nil {
			return main, nil, fmt.Errorf("--compare: %w", err)
		}
		cmp = &p
	}
	return main, cmp, nil
}

// simulationInput is what simulate reads from the cluster.
type simulationInput struct {
	nodes []corev1.Node
	// pods are the non-terminal pods of each node, by node name.
	pods map[string][]*policyinput.Pod
	// usage holds the usage samples, samples how many readings were taken.
	usage   *policyinput.Assembler
	samples int
	now     time.Time
}

// readCluster reads the nodes, samples their usage and then reads their
// pods, sizing the usage history for the longest policy window.
func (s *SimulateOptions) readCluster(ctx context.Context, c Clients, names reclaimable.Names, main loadedPolicy, cmp *loadedPolicy) (*simulationInput, error) {
	// An unknown node or a selector matching nothing is known before the wait.
	nodes, err := s.nodes(ctx, c)
	if err != nil {
		return nil, err
	}
	age := policyinput.HistoryAge(main.cfg, s.MetricsStaleAfter)
	if cmp != nil {
		age = max(age, policyinput.HistoryAge(cmp.cfg, s.MetricsStaleAfter))
	}
	in := &simulationInput{usage: policyinput.New(names)}
	in.usage.Resize(max(age, s.Duration+s.MetricsStaleAfter), min(s.Interval, policyinput.MinScrapeInterval))
	if in.samples, err = s.sample(ctx, c, in.usage); err != nil {
		return nil, err
	}
	if s.Duration > 0 {
		// Nodes come and go while sampling: evaluate those there now.
		if nodes, err = s.nodes(ctx, c); err != nil {
			return nil, err
		}
	}
	in.nodes = nodes
	if in.pods, err = s.pods(ctx, c, nodes, names); err != nil {
		return nil, err
	}
	in.now = s.Now()
	return in, nil
}

// simulate evaluates the policies on every node and sums them up.
func (s *SimulateOptions) simulate(in *simulationInput, names reclaimable.Names, main loadedPolicy, cmp *loadedPolicy, shape reclaimable.Resources) *SimulationReport {
	r := &SimulationReport{TypeMeta: typeMeta("Simulation"), Time: in.now, Policy: main.source, Samples: in.samples,
		Duration: s.Duration.String(), PodShape: shape, Items: make([]SimulatedNode, 0, len(in.nodes))}
	if s.Duration == 0 {
		r.Note = "one usage sample (no --duration): the peak over the policy's window is the usage of this instant; " +
			"sample for a while (--duration 5m) for a value the publisher would keep"
	}
	if cmp != nil {
		r.Compare = cmp.source
	}
	var calc policy.Calculator
	for i := range in.nodes {
		node := &in.nodes[i]
		pn, held := in.usage.Node(node.Name, policyinput.Resources(node.Status.Capacity), policyinput.Resources(node.Status.Allocatable), in.pods[node.Name])
		n := SimulatedNode{Name: node.Name, Allocatable: pn.Allocatable, NodeSamples: len(pn.Samples), Held: held}
		n.SimulatedResult = evaluate(&calc, &pn, node, main.cfg, in.now, s.MetricsStaleAfter, shape, s.Node != "")
		if cmp != nil {
			res := evaluate(&calc, &pn, node, cmp.cfg, in.now, s.MetricsStaleAfter, shape, s.Node != "")
			res.Change = &reclaimable.Resources{CPUMilli: res.Reclaimable.CPUMilli - n.Reclaimable.CPUMilli,
				MemoryBytes: res.Reclaimable.MemoryBytes - n.Reclaimable.MemoryBytes}
			n.Compare = &res
		}
		if value, ok := node.Annotations[names.Annotation]; ok {
			r.Installed = true
			n.published(reclaimable.Judge(value, true, in.now, s.StaleAfter, true))
		}
		r.Items = append(r.Items, n)
	}
	r.Summary = summarize(r.Items, func(n *SimulatedNode) *SimulatedResult { return &n.SimulatedResult })
	if cmp != nil {
		sum := summarize(r.Items, func(n *SimulatedNode) *SimulatedResult { return n.Compare })
		r.CompareSummary = &sum
	}
	return r
}

// published sets what kube-reclaim publishes now for the node, as judged
// from its annotation, and the difference.
func (n *SimulatedNode) published(f reclaimable.Freshness) {
	pub := f.Room
	n.Published = &pub
	if !f.Fresh {
		n.PublishedStale = f.Reason
	}
	n.Difference = &reclaimable.Resources{CPUMilli: n.Reclaimable.CPUMilli - pub.CPUMilli, MemoryBytes: n.Reclaimable.MemoryBytes - pub.MemoryBytes}
}

// print writes the report in the --output format.
func (s *SimulateOptions) print(r *SimulationReport) error {
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
	cfg, warnings, err := policyfile.Parse(data)
	if err != nil {
		return loadedPolicy{}, fmt.Errorf("policy file %s: %w", path, err)
	}
	return loadedPolicy{cfg: cfg, source: "file " + path, warnings: warnings}, nil
}

// policyFromCluster reads the installed policy; no ConfigMap means the
// publisher runs with the built-in default.
func (s *SimulateOptions) policyFromCluster(ctx context.Context, c Clients) (loadedPolicy, error) {
	ref, _ := parseNamespacedName(s.ConfigMap)
	cm, err := c.Kube.CoreV1().ConfigMaps(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
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
	cfg, warnings, err := policyfile.Parse([]byte(data))
	if err != nil {
		return loadedPolicy{}, fmt.Errorf("--from-cluster: the policy in ConfigMap %s is invalid (the publisher keeps its last good policy): %w", s.ConfigMap, err)
	}
	return loadedPolicy{cfg: cfg, source: "ConfigMap " + s.ConfigMap, warnings: warnings}, nil
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
