package kubectlreclaim

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

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
		if _, err := parseNamespacedName(s.ConfigMap); err != nil {
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

// parseNamespacedName reads a namespace/name reference; both parts are
// required.
func parseNamespacedName(s string) (types.NamespacedName, error) {
	ns, name, err := cache.SplitMetaNamespaceKey(s)
	if err != nil || ns == "" || name == "" {
		return types.NamespacedName{}, fmt.Errorf("want namespace/name, got %q", s)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
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
