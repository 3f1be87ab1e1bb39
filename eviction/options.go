// Package eviction is the publisher's eviction controller. It evicts
// reclaimed pods on measured pressure only: when fresh measurements say the
// pods on a node use more memory than a share of its allocatable for longer
// than a grace, it evicts the fewest reclaimed pods, lowest priority first,
// through the Eviction API, until use is back under a lower share; and,
// where the policy file turns it on, it moves a reclaimed pod starved of its
// CPU grant for a long time. A room that dips below what reclaimed pods hold
// stops placement there and evicts nothing: the room is a forecast with a
// margin, and CPU is compressible.
package eviction

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"
)

// Mode is the --eviction flag.
type Mode string

// Modes.
const (
	// ModeOn evicts.
	ModeOn Mode = "on"
	// ModeDryRun decides exactly as ModeOn (grace, order, rate limits) and
	// logs, counts and records Events, but evicts nothing.
	ModeDryRun Mode = "dry-run"
	// ModeOff decides nothing; only the gauges are kept.
	ModeOff Mode = "off"
)

// Options are the publisher's eviction flags.
type Options struct {
	Mode Mode
	// Grace is how long a node's pods must stay above the memory pressure
	// threshold before anything is evicted; 0 means two publish periods.
	Grace time.Duration
	// Rates are evictions per minute; bursts are how many may go at once.
	NodeRate     float64
	NodeBurst    int
	ClusterRate  float64
	ClusterBurst int
}

// NewOptions returns the defaults (see docs/design.md, "Eviction", for why
// the default mode is on).
func NewOptions() Options {
	return Options{Mode: ModeOn, NodeRate: 2, NodeBurst: 4, ClusterRate: 60, ClusterBurst: 20}
}

// AddFlags registers the eviction flags.
func (o *Options) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar((*string)(&o.Mode), "eviction", string(o.Mode), "What to do on measured pressure (the policy file's eviction block): when a node's pods use more memory than eviction.memoryPressure.evictAbove of allocatable for --eviction-grace, evict reclaimed pods until use is under evictUntilBelow; and, where eviction.cpuStarvation is enabled, move a reclaimed pod starved of its CPU grant. on (evict through the Eviction API, PodDisruptionBudgets respected), dry-run (log, count and record Events, evict nothing) or off. A room below what reclaimed pods hold is never a reason.")
	fs.DurationVar(&o.Grace, "eviction-grace", o.Grace, "How long a node's pods must stay above eviction.memoryPressure.evictAbove before its reclaimed pods are evicted; 0 means two --period.")
	fs.Float64Var(&o.NodeRate, "eviction-node-rate", o.NodeRate, "Evictions per minute on one node, after --eviction-node-burst.")
	fs.IntVar(&o.NodeBurst, "eviction-node-burst", o.NodeBurst, "Evictions that may go at once on one node.")
	fs.Float64Var(&o.ClusterRate, "eviction-cluster-rate", o.ClusterRate, "Evictions per minute in the whole cluster, after --eviction-cluster-burst.")
	fs.IntVar(&o.ClusterBurst, "eviction-cluster-burst", o.ClusterBurst, "Evictions that may go at once in the whole cluster.")
}

// Validate returns every invalid eviction flag.
func (o *Options) Validate() error {
	var errs []error
	switch o.Mode {
	case ModeOn, ModeDryRun, ModeOff:
	default:
		errs = append(errs, fmt.Errorf("--eviction must be one of on, dry-run, off; got %q", o.Mode))
	}
	if o.Grace < 0 {
		errs = append(errs, fmt.Errorf("--eviction-grace must not be negative, got %s", o.Grace))
	}
	// A zero rate would silently turn eviction off; --eviction=off says so.
	if !(o.NodeRate > 0) {
		errs = append(errs, fmt.Errorf("--eviction-node-rate must be positive, got %v", o.NodeRate))
	}
	if !(o.ClusterRate > 0) {
		errs = append(errs, fmt.Errorf("--eviction-cluster-rate must be positive, got %v", o.ClusterRate))
	}
	if o.NodeBurst < 1 {
		errs = append(errs, fmt.Errorf("--eviction-node-burst must be at least 1, got %d", o.NodeBurst))
	}
	if o.ClusterBurst < 1 {
		errs = append(errs, fmt.Errorf("--eviction-cluster-burst must be at least 1, got %d", o.ClusterBurst))
	}
	return errors.Join(errs...)
}
