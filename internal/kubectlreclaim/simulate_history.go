package kubectlreclaim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kube-reclaim/kube-reclaim/internal/replay"
	"github.com/kube-reclaim/kube-reclaim/policy"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// history are the flags of `simulate --history FILE`: a replay of recorded
// usage through the policy, reading nothing from a cluster.
type history struct {
	File              string
	NodeCPU, NodeMem  string
	Step              time.Duration
	DecreaseThreshold float64
	TimelineNode      string
	BatchLifetime     time.Duration
}

func (h *history) addFlags(fs *pflag.FlagSet) {
	h.NodeCPU, h.NodeMem, h.Step, h.DecreaseThreshold = "32", "128Gi", replay.DefaultStep, replay.DefaultConfig().DecreaseThreshold
	h.BatchLifetime = replay.DefaultConfig().BatchLifetime
	fs.StringVar(&h.File, "history", h.File, "Replay this CSV of per-pod usage samples (gzip accepted) through the policy instead of reading the cluster; "+
		"columns pod,time,cpu_request,memory_request,cpu_usage,memory_usage[,node] or the Bitbrains GWA-T-12 columns. "+
		"Prints reclaimed share, violations and evictions per policy (-f, --compare) beside the baselines (docs/design.md, Replay).")
	fs.StringVar(&h.NodeCPU, "node-cpu", h.NodeCPU, "With --history: allocatable CPU of every node (pods without a node are packed first-fit decreasing onto nodes of this size).")
	fs.StringVar(&h.NodeMem, "node-memory", h.NodeMem, "With --history: allocatable memory of every node.")
	fs.DurationVar(&h.Step, "step", h.Step, "With --history: the replay's cycle; samples move to the next multiple of it.")
	fs.Float64Var(&h.DecreaseThreshold, "decrease-threshold", h.DecreaseThreshold, "With --history: the publisher's --decrease-threshold.")
	fs.StringVar(&h.TimelineNode, "timeline-node", h.TimelineNode, "With --history and -o json: the node whose timeline the report carries (default: the busiest).")
	fs.DurationVar(&h.BatchLifetime, "batch-lifetime", h.BatchLifetime, "With --history: how long the replay's batch jobs run unless evicted.")
}

func (h *history) node() (reclaimable.Resources, error) {
	cpu, err := resource.ParseQuantity(h.NodeCPU)
	if err != nil || cpu.Sign() <= 0 {
		return reclaimable.Resources{}, fmt.Errorf("--node-cpu: want a positive quantity, got %q", h.NodeCPU)
	}
	mem, err := resource.ParseQuantity(h.NodeMem)
	if err != nil || mem.Sign() <= 0 {
		return reclaimable.Resources{}, fmt.Errorf("--node-memory: want a positive quantity, got %q", h.NodeMem)
	}
	return reclaimable.Resources{CPUMilli: cpu.MilliValue(), MemoryBytes: mem.Value()}, nil
}

// runHistory replays --history under -f (or the built-in default) and
// --compare, beside the baselines.
func (s *SimulateOptions) runHistory(ctx context.Context) error {
	var errs []error
	if s.FromCluster {
		errs = append(errs, errors.New("--history reads no cluster: use -f instead of --from-cluster"))
	}
	if s.Node != "" || s.Selector != "" {
		errs = append(errs, errors.New("--history replays every node of the file: no node name or --selector"))
	}
	format := s.output.format()
	if format != outputTable && format != "json" {
		errs = append(errs, fmt.Errorf("--history prints the table or -o json, not %q", format))
	}
	node, err := s.History.node()
	if err != nil {
		errs = append(errs, err)
	}
	if s.History.DecreaseThreshold < 0 || s.History.DecreaseThreshold >= 1 {
		errs = append(errs, fmt.Errorf("--decrease-threshold must be in [0,1), got %v", s.History.DecreaseThreshold))
	}
	if s.History.BatchLifetime < s.History.Step {
		errs = append(errs, fmt.Errorf("--batch-lifetime %s is shorter than --step %s", s.History.BatchLifetime, s.History.Step))
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	main := policy.DefaultSettings()
	mainName := "default"
	if s.PolicyFile != "" {
		lp, err := policyFromFile(s.PolicyFile)
		if err != nil {
			return err
		}
		s.warn(&lp)
		main, mainName = lp.cfg.Default, s.PolicyFile
	}
	contenders := []replay.Contender{{Name: mainName, Settings: &main}}
	if s.CompareFile != "" {
		lp, err := policyFromFile(s.CompareFile)
		if err != nil {
			return err
		}
		s.warn(&lp)
		cmp := lp.cfg.Default
		contenders = append(contenders, replay.Contender{Name: s.CompareFile, Settings: &cmp})
	}
	tr, err := replay.ReadFile(s.History.File, replay.Options{Step: s.History.Step, Node: node})
	if err != nil {
		return err
	}
	contenders = append(contenders, replay.Baselines(tr.Step)...)
	cfg := replay.DefaultConfig()
	cfg.DecreaseThreshold = s.History.DecreaseThreshold
	cfg.MetricsStaleAfter = s.MetricsStaleAfter
	cfg.TimelineNode = s.History.TimelineNode
	cfg.BatchLifetime = s.History.BatchLifetime
	rep, err := replay.Run(ctx, tr, contenders, cfg)
	if err != nil {
		return err
	}
	if format == "json" {
		enc := json.NewEncoder(s.Streams.Out)
		enc.SetIndent("", "  ")
		return enc.Encode(rep)
	}
	return replay.WriteTable(s.Streams.Out, rep)
}
