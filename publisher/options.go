// Package publisher is the leader-elected controller that measures every
// node, runs the policy, and publishes the reclaimable CPU and memory on the
// node: the annotation (the webhook and extender read it) and the extended
// resources in status.capacity and status.allocatable, in one write.
package publisher

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"

	"github.com/kube-reclaim/kube-reclaim/eviction"
	"github.com/kube-reclaim/kube-reclaim/internal/cli"
	"github.com/kube-reclaim/kube-reclaim/internal/leaderlease"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// Options are the flags of `kube-reclaim publisher`.
type Options struct {
	cli.Common

	ConfigFile           string
	ConfigReloadInterval time.Duration
	ConfigMap            string // namespace/name, for Events about the policy file
	// AllowNodeSettablePools accepts a policy file whose pools select
	// nodes by labels their own kubelets can set (policy.NodeSettableLabel).
	AllowNodeSettablePools bool

	Period            time.Duration
	RefreshInterval   time.Duration
	MetricsStaleAfter time.Duration
	DecreaseThreshold float64
	Workers           int
	WriteTimeout      time.Duration
	PerNodeMetrics    bool
	// CycleDeadline: /healthz fails when the leader makes no progress for
	// this long (Publisher.checkProgress); 0 means cycleDeadline's default.
	CycleDeadline time.Duration

	// LeaderElection: --leader-elect-*; the webhook and the extender watch
	// the Lease it names (their --publisher-lease-*).
	LeaderElection leaderlease.Election

	Eviction eviction.Options
}

// defaultDecreaseThreshold: a decrease of the room within the band an
// increase must leave (the policy's default changeThreshold) waits for the
// refresh. Room is what is left after usage, so noise on usage moves it by
// more than the noise, and each decrease written restarts the node's refresh
// clock; held back, such a decrease stays inside the policy's default margin
// for at most one refresh interval, and eviction judges the computed room,
// not this one. docs/benchmarks.md ("Counting writes") has the measurements
// (BenchmarkCycleWrites) behind the value.
const defaultDecreaseThreshold = 0.10

// NewOptions returns the defaults.
func NewOptions() *Options {
	return &Options{
		Common:               cli.DefaultCommon(":8080"),
		ConfigReloadInterval: 10 * time.Second,
		ConfigMap:            "kube-reclaim/kube-reclaim-policy",
		Period:               15 * time.Second,
		RefreshInterval:      reclaimable.DefaultRefreshInterval,
		MetricsStaleAfter:    reclaimable.DefaultMetricsStaleAfter,
		DecreaseThreshold:    defaultDecreaseThreshold,
		Workers:              16,
		WriteTimeout:         10 * time.Second,
		PerNodeMetrics:       true,
		LeaderElection:       leaderlease.DefaultElection(),
		Eviction:             eviction.NewOptions(),
	}
}

// AddFlags registers the publisher's flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	o.Common.AddFlags(fs)
	fs.StringVar(&o.ConfigFile, "config", o.ConfigFile, "Policy file (YAML: default policy and per-pool overrides). Built-in defaults when empty. Reloaded when it changes; a broken new file is rejected and the last good one stays in force.")
	fs.DurationVar(&o.ConfigReloadInterval, "config-reload-interval", o.ConfigReloadInterval, "How often the policy file is checked for changes.")
	fs.StringVar(&o.ConfigMap, "config-map", o.ConfigMap, "namespace/name of the ConfigMap holding the policy file; Events about rejected files are recorded on it.")
	fs.BoolVar(&o.AllowNodeSettablePools, "allow-node-settable-pool-labels", o.AllowNodeSettablePools, "Accept a policy file whose pools select nodes by a label the node's own kubelet can set (any label outside <domain>/, node-restriction.kubernetes.io/ and the kubernetes.io and k8s.io labels kubelets may not set), which lets a node choose its own pool and with it the margins and caps of its own room. Off: such a file is an error at start and is rejected on reload (the last good one stays in force).")
	fs.DurationVar(&o.Period, "period", o.Period, "How often usage is read from metrics.k8s.io and every node is evaluated.")
	fs.DurationVar(&o.RefreshInterval, "refresh-interval", o.RefreshInterval, "Rewrite a node's annotation at least this often even when nothing changed, so readers can tell a live publisher from a dead one. When more refreshes come due at once than a cycle writes (twice the steady rate), some wait, up to half an interval: keep one and a half times this below the readers' --stale-after.")
	fs.DurationVar(&o.MetricsStaleAfter, "metrics-stale-after", o.MetricsStaleAfter, "Publish zero for a node whose newest usage sample is older than this.")
	fs.Float64Var(&o.DecreaseThreshold, "decrease-threshold", o.DecreaseThreshold, "A decrease smaller than this fraction of the published value is measurement noise and waits for the next refresh, unless the new value is below what reclaimed pods on the node already hold. Increases are gated by the policy file's changeThreshold. Room published this much too high for up to a refresh interval must fit in the policy's margin.")
	fs.IntVar(&o.Workers, "workers", o.Workers, "Nodes written in parallel.")
	fs.DurationVar(&o.WriteTimeout, "write-timeout", o.WriteTimeout, "Time allowed for one node's writes, retries included; a failing node never stalls the others.")
	fs.BoolVar(&o.PerNodeMetrics, "per-node-metrics", o.PerNodeMetrics, "Export the room published on every node and what its batch pods hold as four gauges labelled by node (four series per node: 20,000 at 5,000 nodes). The cluster-wide and per-pool sums are exported either way.")
	fs.DurationVar(&o.CycleDeadline, "cycle-deadline", o.CycleDeadline, "While this replica leads, /healthz fails once no cycle has finished and no node write has ended for this long, so that the kubelet restarts a publisher stuck in a cycle. 0 means 5 × --period, at least 2m. Keep it above the longest step of a healthy cycle: reading usage (up to the larger of --period and 10s) and one cycle's evictions (each up to --write-timeout).")
	o.LeaderElection.AddFlags(fs)
	o.Eviction.AddFlags(fs)
}

// Liveness deadline of the cycles when --cycle-deadline is 0:
// cycleDeadlinePeriods periods, at least minCycleDeadline.
const (
	cycleDeadlinePeriods = 5
	minCycleDeadline     = 2 * time.Minute
)

// cycleDeadline is --cycle-deadline, or its default when 0.
func (o *Options) cycleDeadline() time.Duration {
	if o.CycleDeadline > 0 {
		return o.CycleDeadline
	}
	return max(cycleDeadlinePeriods*o.Period, minCycleDeadline)
}

// Validate reports every invalid flag at once.
func (o *Options) Validate() error {
	errs := []error{o.Common.Validate(), o.Eviction.Validate()}
	pos := func(name string, d time.Duration) {
		if d <= 0 {
			errs = append(errs, fmt.Errorf("--%s must be positive, got %s", name, d))
		}
	}
	pos("period", o.Period)
	pos("refresh-interval", o.RefreshInterval)
	pos("metrics-stale-after", o.MetricsStaleAfter)
	pos("config-reload-interval", o.ConfigReloadInterval)
	pos("write-timeout", o.WriteTimeout)
	if o.MetricsStaleAfter > 0 && o.Period > 0 && o.MetricsStaleAfter < o.Period {
		errs = append(errs, fmt.Errorf("--metrics-stale-after (%s) must be at least --period (%s)", o.MetricsStaleAfter, o.Period))
	}
	if o.CycleDeadline < 0 {
		errs = append(errs, fmt.Errorf("--cycle-deadline must not be negative, got %s", o.CycleDeadline))
	} else if o.CycleDeadline > 0 && o.CycleDeadline < 2*o.Period {
		errs = append(errs, fmt.Errorf("--cycle-deadline (%s) must be at least twice --period (%s): a cycle finishes once a period at best", o.CycleDeadline, o.Period))
	}
	if o.DecreaseThreshold < 0 || o.DecreaseThreshold >= 1 {
		errs = append(errs, fmt.Errorf("--decrease-threshold must be in [0,1), got %v", o.DecreaseThreshold))
	}
	if o.Workers < 1 {
		errs = append(errs, fmt.Errorf("--workers must be at least 1, got %d", o.Workers))
	}
	errs = append(errs, o.LeaderElection.Validate())
	if _, _, err := splitNamespaced(o.ConfigMap); o.ConfigMap != "" && err != nil {
		errs = append(errs, fmt.Errorf("--config-map: %w", err))
	}
	return errors.Join(errs...)
}

func splitNamespaced(s string) (string, string, error) {
	for i := 0; i < len(s); i++ {
		if s[i] == '/' {
			if i == 0 || i == len(s)-1 {
				break
			}
			return s[:i], s[i+1:], nil
		}
	}
	return "", "", fmt.Errorf("%q is not namespace/name", s)
}
