package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/kube-reclaim/kube-reclaim/internal/replay"
	"github.com/kube-reclaim/kube-reclaim/policy"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/cputime"
)

// replayTrace is the shared real trace (../shared/traces/README.md), read
// from beside the repository: it is not ours to commit.
const replayTrace = "../shared/traces/bitbrains-rnd-2013-08-vm001-250.csv.gz"

// replayNode is the node size the trace's VMs are packed onto.
var replayNode = reclaimable.Resources{CPUMilli: 32000, MemoryBytes: 128 << 30}

type replayResult struct {
	Report *replay.Report `json:"report"`
	// CPUSeconds is the process CPU (user + system) of reading and replaying
	// the trace under the shipped defaults and the two baselines.
	CPUSeconds float64 `json:"cpuSeconds"`
	// Frontier is the defaults with other margins, the same run otherwise.
	Frontier *replay.Report `json:"frontier,omitempty"`
}

// runReplay replays the shared trace under the shipped defaults beside the
// baselines, then a margin sweep for the frontier; charts go to chartDir
// when set.
func runReplay(ctx context.Context, root, chartDir string, out io.Writer) (*replayResult, error) {
	path := filepath.Join(root, replayTrace)
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("the shared trace is missing (%s): %w", path, err)
	}
	start, _ := cputime.Process()
	tr, err := replay.ReadFile(path, replay.Options{Node: replayNode})
	if err != nil {
		return nil, err
	}
	d := policy.DefaultSettings()
	rep, err := replay.Run(ctx, tr, append([]replay.Contender{{Name: "defaults", Settings: &d, Describe: "the shipped defaults"}},
		replay.Baselines(tr.Step)...), replay.DefaultConfig())
	if err != nil {
		return nil, err
	}
	end, _ := cputime.Process()
	res := &replayResult{Report: rep, CPUSeconds: (end - start).Seconds()}
	if err := replay.WriteTable(out, rep); err != nil {
		return nil, err
	}
	fmt.Fprintf(out, "replay CPU (read + replay, defaults and baselines): %.1f s\n\n", res.CPUSeconds)

	var sweep []replay.Contender
	for _, m := range []float64{0.15, 0.20, 0.25, 0.30, 0.35, 0.40, 0.45, 0.50} {
		s := policy.DefaultSettings()
		s.CPU.Margin, s.Memory.Margin = m, m
		sweep = append(sweep, replay.Contender{Name: fmt.Sprintf("margin %.2f", m), Settings: &s})
	}
	sweep = append(sweep, replay.Baselines(tr.Step)...)
	if res.Frontier, err = replay.Run(ctx, tr, sweep, replay.DefaultConfig()); err != nil {
		return nil, err
	}
	fmt.Fprintln(out, "Frontier: the defaults with other margins (CPU and memory alike)")
	if err := replay.WriteTable(out, res.Frontier); err != nil {
		return nil, err
	}
	if chartDir != "" {
		for name, write := range map[string]func() error{
			"replay-frontier.png": func() error {
				return replay.WriteFrontierChart(res.Frontier, filepath.Join(chartDir, "replay-frontier.png"))
			},
			"replay-timeline.png": func() error {
				return replay.WriteTimelineChart(rep.Results[0].Timeline, filepath.Join(chartDir, "replay-timeline.png"))
			},
		} {
			if err := write(); err != nil {
				return nil, fmt.Errorf("%s: %w", name, err)
			}
		}
		fmt.Fprintf(out, "charts written to %s\n", chartDir)
	}
	return res, nil
}

// replayRows are the replay's goals (issue 30, docs/design.md "Replay").
func replayRows(r *replayResult, errs map[string]string) []row {
	const (
		cpuViol = "replay: CPU violations of the defaults (% of node-intervals)"
		memViol = "replay: memory violations of the defaults (% of node-intervals)"
		cpuRecl = "replay: CPU reclaimed by the defaults (% of capacity left unused)"
		memRecl = "replay: memory reclaimed by the defaults (% of capacity left unused)"
		cpuTime = "replay: CPU time of the month of 250 pods"
	)
	var rows []row
	add := func(x row) { rows = append(rows, x.evaluate()) }
	if r == nil {
		for _, w := range []string{cpuViol, memViol, cpuRecl, memRecl, cpuTime} {
			add(missing("R1", w, why(errs, "replay", "not run")))
		}
		return rows
	}
	def := r.Report.Results[0].Cluster
	add(goals.ReplayCPUViolations.on(row{ID: "R1", What: cpuViol, Measured: 100 * def.CPU.ViolationRate, Unit: "%"}))
	add(goals.ReplayMemoryViolations.on(row{ID: "R1", What: memViol, Measured: 100 * def.Memory.ViolationRate, Unit: "%"}))
	add(goals.ReplayReclaimed.on(row{ID: "R1", What: cpuRecl, Measured: 100 * def.CPU.ReclaimedShare, Unit: "%"}))
	add(goals.ReplayReclaimed.on(row{ID: "R1", What: memRecl, Measured: 100 * def.Memory.ReclaimedShare, Unit: "%"}))
	for _, b := range r.Report.Results[1:] {
		for _, res := range []string{"CPU", "memory"} {
			d, o := def.CPU, b.Cluster.CPU
			if res == "memory" {
				d, o = def.Memory, b.Cluster.Memory
			}
			dominated := o.ReclaimedShare >= d.ReclaimedShare && o.ViolationRate <= d.ViolationRate &&
				(o.ReclaimedShare > d.ReclaimedShare || o.ViolationRate < d.ViolationRate)
			v := 1.0
			if dominated {
				v = 0
			}
			add(goals.ReplayNotDominated.on(row{ID: "R2", What: fmt.Sprintf("replay: defaults not dominated by %s on %s (1 = not dominated)", b.Name, res), Measured: v,
				Note: fmt.Sprintf("defaults %.1f%% reclaimed at %.3f%% violations; %s %.1f%% at %.3f%%",
					100*d.ReclaimedShare, 100*d.ViolationRate, b.Name, 100*o.ReclaimedShare, 100*o.ViolationRate)}))
		}
	}
	add(goals.ReplayCPUTime.on(row{ID: "R3", What: cpuTime, Measured: r.CPUSeconds, Unit: "s",
		Note: "reading the gzip'd CSV and replaying defaults and both baselines, user + system"}))
	return rows
}
