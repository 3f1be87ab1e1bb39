package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

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

// replayLifetimes are the batch jobs' lengths the replay reports: an hour's
// job and a night's.
var replayLifetimes = []time.Duration{time.Hour, 8 * time.Hour}

// replayOutage is one metrics-server outage in the replayed month, so that
// the staleness path (zero room, no eviction, batch pods kept) is taken.
const (
	replayOutageStart = 10 * 24 * time.Hour
	replayOutageFor   = time.Hour
)

// replayConfig are the flags of `bench replay`.
type replayConfig struct {
	// trace is the trace's path; relative paths are from the repository root.
	trace string
	// charts is where the charts go (empty: none).
	charts string
	// longPeaks also replays replayLongPeaks with every job length.
	longPeaks bool
}

// replayLongPeaks are the rooms from the peak of regular usage over hours or
// days (replay.LongPeak, evaluation code: the policy's window stops at an
// hour) that `bench replay -long-peaks` puts beside the defaults: the best
// of the frontier issue 40's search found on the shared month (docs/design.md,
// "Replay").
var replayLongPeaks = []replay.LongPeak{
	{CPUWindow: 24 * time.Hour, CPUMargin: 0.15, MemoryWindow: 24 * time.Hour, MemoryMargin: 0.35},
	{CPUWindow: 48 * time.Hour, CPUMargin: 0.10, MemoryWindow: 24 * time.Hour, MemoryMargin: 0.30},
	{CPUWindow: 48 * time.Hour, CPUMargin: 0.15, MemoryWindow: 24 * time.Hour, MemoryMargin: 0.35},
	{CPUWindow: 48 * time.Hour, CPUMargin: 0.10, MemoryWindow: 168 * time.Hour, MemoryMargin: 0.25},
	{CPUWindow: 48 * time.Hour, CPUMargin: 0.10, MemoryWindow: 168 * time.Hour, MemoryMargin: 0.30},
	{CPUWindow: 48 * time.Hour, CPUMargin: 0.10, MemoryWindow: 720 * time.Hour, MemoryMargin: 0.25},
	{CPUWindow: 168 * time.Hour, CPUMargin: 0.10, MemoryWindow: 24 * time.Hour, MemoryMargin: 0.25},
}

// longPeakContenders are the defaults beside replayLongPeaks at the trace's
// step.
func longPeakContenders(step time.Duration) []replay.Contender {
	d := policy.DefaultSettings()
	cs := []replay.Contender{{Name: "defaults", Settings: &d, Describe: "the shipped defaults"}}
	for _, l := range replayLongPeaks {
		l.Step = step
		cs = append(cs, replay.Contender{Name: l.Name(), Formula: l,
			Describe: "evaluation: allocatable x (1 - margin) - the peak of regular usage over the window, per resource"})
	}
	return cs
}

type replayResult struct {
	// Runs are the shipped defaults beside the baselines, one per lifetime
	// of replayLifetimes.
	Runs []*replay.Report `json:"runs"`
	// CPUSeconds is the process CPU (user + system) of reading and replaying
	// the trace under the shipped defaults and the two baselines, for the
	// first lifetime.
	CPUSeconds float64 `json:"cpuSeconds"`
	// Frontier is the defaults with other margins, the first lifetime.
	Frontier *replay.Report `json:"frontier,omitempty"`
	// Shipped names the frontier's contender that is the shipped defaults.
	Shipped string `json:"shipped"`
	// RoomDip is the evictions per 100 batch pod-hours of the controller
	// before issue 40 (evicting when batch pods held more than the room),
	// by job length, as docs/benchmarks.md records them: that controller
	// is gone, so it cannot run beside the defaults.
	RoomDip map[string]roomDipFigure `json:"roomDip,omitempty"`
}

// roomDipFigure is one recorded figure of the room-dip controller.
type roomDipFigure struct {
	Evictions float64 `json:"evictionsPer100PodHours"`
	Commit    string  `json:"commit"`
}

// benchmarksDoc records the runs; its room-dip rows are read back.
const benchmarksDoc = "docs/benchmarks.md"

// roomDipFigures reads the rows "| room-dip | COMMIT | JOBS | EVICTIONS |
// ..." of docs/benchmarks.md, by job length (1h, 8h).
func roomDipFigures(doc string) (map[string]roomDipFigure, error) {
	out := map[string]roomDipFigure{}
	for _, line := range strings.Split(doc, "\n") {
		c := cells(line)
		if len(c) < 4 || c[0] != "room-dip" {
			continue
		}
		v, err := strconv.ParseFloat(c[3], 64)
		if err != nil {
			return nil, fmt.Errorf("%s: room-dip row %q: %w", benchmarksDoc, line, err)
		}
		out[c[2]] = roomDipFigure{Evictions: v, Commit: strings.Trim(c[1], "`")}
	}
	return out, nil
}

// cells splits a markdown table row; nil when the line is not one.
func cells(line string) []string {
	line = strings.TrimSpace(line)
	if !strings.HasPrefix(line, "|") {
		return nil
	}
	parts := strings.Split(strings.Trim(line, "|"), "|")
	for i := range parts {
		parts[i] = strings.TrimSpace(parts[i])
	}
	return parts
}

func replayContenders(tr *replay.Trace) []replay.Contender {
	d := policy.DefaultSettings()
	return append([]replay.Contender{{Name: "defaults", Settings: &d, Describe: "the shipped defaults"}}, replay.Baselines(tr.Step)...)
}

func replayRunConfig(tr *replay.Trace, lifetime time.Duration) replay.Config {
	cfg := replay.DefaultConfig()
	cfg.BatchLifetime = lifetime
	from := tr.Start.Add(replayOutageStart)
	cfg.Outages = []replay.Outage{{From: from, To: from.Add(replayOutageFor)}}
	return cfg
}

// runReplay replays the shared trace under the shipped defaults beside the
// baselines, for each job length, then a margin sweep for the frontier;
// charts go to cfg.charts when set.
func runReplay(ctx context.Context, root string, cfg replayConfig, out io.Writer) (*replayResult, error) {
	path := cfg.trace
	if path == "" {
		path = replayTrace
	}
	if !filepath.IsAbs(path) {
		path = filepath.Join(root, path)
	}
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("the shared trace is missing (%s): %w", path, err)
	}
	start, _ := cputime.Process()
	tr, err := replay.ReadFile(path, replay.Options{Node: replayNode})
	if err != nil {
		return nil, err
	}
	res := &replayResult{}
	if doc, err := os.ReadFile(filepath.Join(root, benchmarksDoc)); err == nil {
		if res.RoomDip, err = roomDipFigures(string(doc)); err != nil {
			return nil, err
		}
	}
	for i, lifetime := range replayLifetimes {
		rep, err := replay.Run(ctx, tr, replayContenders(tr), replayRunConfig(tr, lifetime))
		if err != nil {
			return nil, err
		}
		if i == 0 {
			end, _ := cputime.Process()
			res.CPUSeconds = (end - start).Seconds()
		}
		res.Runs = append(res.Runs, rep)
		if err := replay.WriteTable(out, rep); err != nil {
			return nil, err
		}
		fmt.Fprintln(out)
	}
	fmt.Fprintf(out, "replay CPU (read + replay, defaults and baselines, %s jobs): %.1f s\n\n", replayLifetimes[0], res.CPUSeconds)

	var sweep []replay.Contender
	d := policy.DefaultSettings()
	for _, m := range []float64{0.15, 0.20, 0.25, 0.30, 0.35, 0.40, 0.45, 0.50} {
		s := policy.DefaultSettings()
		s.CPU.Margin, s.Memory.Margin = m, m
		name := fmt.Sprintf("margin %.2f", m)
		if s == d {
			res.Shipped = name
		}
		sweep = append(sweep, replay.Contender{Name: name, Settings: &s})
	}
	sweep = append(sweep, replay.Baselines(tr.Step)...)
	if res.Frontier, err = replay.Run(ctx, tr, sweep, replayRunConfig(tr, replayLifetimes[0])); err != nil {
		return nil, err
	}
	fmt.Fprintln(out, "Frontier: the defaults with other margins (CPU and memory alike)")
	if err := replay.WriteTable(out, res.Frontier); err != nil {
		return nil, err
	}
	fmt.Fprintln(out, "\nFor docs/design.md (Replay):")
	if err := replay.WriteMarkdown(out, append([]*replay.Report{res.Frontier}, res.Runs[1:]...), res.Shipped); err != nil {
		return nil, err
	}
	if cfg.longPeaks {
		var reps []*replay.Report
		for _, lifetime := range replayLifetimes {
			rep, err := replay.Run(ctx, tr, longPeakContenders(tr.Step), replayRunConfig(tr, lifetime))
			if err != nil {
				return nil, err
			}
			reps = append(reps, rep)
		}
		fmt.Fprintln(out, "\nLonger windows: the room from the peak of regular usage over hours or days (evaluation code, not policy settings)")
		if err := replay.WriteMarkdown(out, reps, ""); err != nil {
			return nil, err
		}
	}
	if cfg.charts != "" {
		g := replay.FrontierGoals{CPUViolationRate: goals.ReplayCPUViolations.Value / 100, RegularHarm: goals.ReplayRegularHarm.Value,
			Reclaimed: goals.ReplayReclaimed.Value / 100}
		if err := replay.WriteFrontierChart(res.Frontier, res.Shipped, g, filepath.Join(cfg.charts, "replay-frontier.png")); err != nil {
			return nil, fmt.Errorf("replay-frontier.png: %w", err)
		}
		if err := replay.WriteTimelineChart(res.Runs[0].Results[0].Timeline, filepath.Join(cfg.charts, "replay-timeline.png")); err != nil {
			return nil, fmt.Errorf("replay-timeline.png: %w", err)
		}
		fmt.Fprintf(out, "charts written to %s\n", cfg.charts)
	}
	return res, nil
}

// replayRows are the replay's goals (issues 30 and 40, docs/design.md
// "Replay"): every figure of the shipped defaults, per job length, next to
// its goal.
func replayRows(r *replayResult, errs map[string]string) []row {
	var rows []row
	add := func(x row) { rows = append(rows, x.evaluate()) }
	if r == nil {
		for _, w := range []string{"replay: the shipped defaults on the shared trace", "replay: CPU time of the month of 250 pods"} {
			add(missing("R", w, why(errs, "replay", "not run")))
		}
		return rows
	}
	for _, rep := range r.Runs {
		def := rep.Results[0]
		c := def.Cluster
		jobs := "defaults, " + replay.ShortDuration(rep.BatchLifetime) + " jobs"
		add(goals.ReplayCPUViolations.on(row{ID: "R1", What: "replay: CPU violations, usage + held > allocatable (% of node-intervals), " + jobs,
			Measured: 100 * c.CPU.ViolationRate, Note: spreadNote(def.Spread.CPUViolationRate, 100, "%")}))
		add(goals.ReplayRegularHarm.on(row{ID: "R1", What: "replay: regular harm, memory usage + held > allocatable (node-intervals), " + jobs,
			Measured: float64(c.RegularHarm), Note: spreadNote(def.Spread.RegularHarm, 1, "")}))
		add(goals.ReplayReclaimed.on(row{ID: "R1", What: "replay: CPU reclaimed (% of capacity left unused), " + jobs,
			Measured: 100 * c.CPU.ReclaimedShare, Note: spreadNote(def.Spread.CPUReclaimed, 100, "%")}))
		add(goals.ReplayReclaimed.on(row{ID: "R1", What: "replay: memory reclaimed (% of capacity left unused), " + jobs,
			Measured: 100 * c.Memory.ReclaimedShare, Note: spreadNote(def.Spread.MemoryReclaimed, 100, "%")}))
		ev := row{ID: "R1", What: "replay: evictions per 100 batch pod-hours, " + jobs,
			Measured: c.EvictionsPer100PodHours, Note: fmt.Sprintf("%d evictions in %.0f pod-hours, %d jobs completed; %s",
				c.Evictions, c.BatchPodHours, c.Completed, spreadNote(def.Spread.EvictionsPer100PodHours, 1, ""))}
		if old, ok := r.RoomDip[replay.ShortDuration(rep.BatchLifetime)]; ok {
			ev.Baseline = old.Evictions
			ev.Note += fmt.Sprintf("; baseline: the room-dip controller it replaces, recorded at %s in %s (not this run)", old.Commit, benchmarksDoc)
		}
		add(goals.ReplayEvictions.on(ev))
		add(row{ID: "R1", What: "replay: batch CPU shortfall (% of granted CPU regular demand took back), " + jobs,
			Measured: 100 * c.CPUShortfall, Unit: "%", Note: spreadNote(def.Spread.CPUShortfall, 100, "%")})
		add(goals.ReplayStatusFloor.on(row{ID: "R1", What: "replay: node-intervals with the status below what batch pods held, " + jobs,
			Measured: float64(c.StatusBelowHeld), Note: fmt.Sprintf("%d node-intervals with a zero room for stale samples", c.StaleIntervals)}))
	}
	def := r.Runs[0].Results[0].Cluster
	for _, b := range r.Runs[0].Results[1:] {
		for _, res := range []string{"CPU", "memory"} {
			d, o := def.CPU, b.Cluster.CPU
			dv, ov := d.ViolationRate, o.ViolationRate
			if res == "memory" {
				d, o = def.Memory, b.Cluster.Memory
				dv, ov = def.RegularHarmRate, b.Cluster.RegularHarmRate
			}
			dominated := o.ReclaimedShare >= d.ReclaimedShare && ov <= dv &&
				(o.ReclaimedShare > d.ReclaimedShare || ov < dv)
			v := 1.0
			if dominated {
				v = 0
			}
			add(goals.ReplayNotDominated.on(row{ID: "R2", What: fmt.Sprintf("replay: defaults not dominated by %s on %s (1 = not dominated)", b.Name, res), Measured: v,
				Note: fmt.Sprintf("defaults %.1f%% reclaimed at %.3f%% violations; %s %.1f%% at %.3f%%",
					100*d.ReclaimedShare, 100*dv, b.Name, 100*o.ReclaimedShare, 100*ov)}))
		}
	}
	add(goals.ReplayCPUTime.on(row{ID: "R3", What: "replay: CPU time of the month of 250 pods", Measured: r.CPUSeconds,
		Note: "reading the gzip'd CSV and replaying defaults and both baselines (1h jobs), user + system"}))
	return rows
}

// spreadNote says a measure's median node and worst node.
func spreadNote(s replay.NodeSpread, scale float64, unit string) string {
	return fmt.Sprintf("across nodes: median %s%s, worst %s%s (%s)", formatNumber(scale*s.Median), unit, formatNumber(scale*s.Worst), unit, s.WorstNode)
}
