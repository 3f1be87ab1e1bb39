package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-reclaim/kube-reclaim/extender"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/stack"
)

type allConfig struct {
	output  string
	skip    string
	quick   bool
	webhook webhookConfig
	sched   schedulerConfig
	rss     rssConfig
	scale   scaleConfig
	// replay: the trace and where the replay writes its charts (empty: none).
	replay replayConfig
}

func (c *allConfig) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.output, "o", "bench-results.json", "write the results as JSON to this file (empty: do not write)")
	fs.StringVar(&c.skip, "skip", "", "comma-separated parts to skip: gotest, webhook, scheduler, rss, scale, replay")
	fs.StringVar(&c.replay.trace, "replay-trace", replayTrace, "the trace the replay reads (relative: from the repository root)")
	fs.StringVar(&c.replay.charts, "replay-charts", "", "write the replay's charts (replay-frontier.png, replay-timeline.png) to this directory, e.g. docs")
	fs.BoolVar(&c.quick, "quick", false, "small sizes and short runs to try the command out, overriding the size flags (the numbers mean little)")
	c.webhook.flags(fs)
	c.sched.flags(fs)
	c.rss.flags(fs)
	c.scale.flags(fs)
}

func (c *allConfig) skipped(part string) bool {
	for _, s := range strings.Split(c.skip, ",") {
		if strings.TrimSpace(s) == part {
			return true
		}
	}
	return false
}

// goBenches are the Go benchmarks of `bench all`, with a fixed -benchtime so
// that runs compare; quick only lowers the counts.
func goBenches(quick bool) []goBench {
	if quick {
		return []goBench{
			{"./webhook/", "^BenchmarkHandler$", "300x"},
			{"./extender/", "^BenchmarkFilterPrioritize$", "100x"},
			{"./policy/", "^BenchmarkComputeCluster$", "1x"},
			{"./publisher/", "^(BenchmarkCycle|BenchmarkCycleWrites)$", "1x"},
		}
	}
	return []goBench{
		{"./webhook/", "^BenchmarkHandler$", "5000x"},
		{"./extender/", "^BenchmarkFilterPrioritize$", "2000x"},
		{"./policy/", "^BenchmarkComputeCluster$", "5x"},
		{"./publisher/", "^(BenchmarkCycle|BenchmarkCycleWrites)$", "3x"},
	}
}

// runAll is `bench all`: every measurement, one table, one JSON file.
func runAll(ctx context.Context, cfg allConfig, out io.Writer) error {
	root, err := cluster.RepoRoot()
	if err != nil {
		return err
	}
	if cfg.quick {
		cfg.webhook.stepDuration = time.Second
		cfg.webhook.cpuReviews = 500
		cfg.sched.nodes, cfg.sched.pods, cfg.sched.warmup, cfg.sched.rounds = 100, 200, 20, 1
		cfg.sched.runs = 1
		cfg.rss.nodes, cfg.rss.observe = 500, 30*time.Second
		cfg.scale.nodes, cfg.scale.observe = 100, 30*time.Second
	}
	rep := report{Time: time.Now().UTC(), Machine: describeMachine(), Details: map[string]any{}}
	var (
		lines []benchLine
		wh    *webhookResult
		sched []p2Set
		rss   *rssResult
		scale *scaleResult
		errs  = map[string]string{}
	)
	if !cfg.skipped("gotest") {
		section(out, "Go benchmarks")
		for _, b := range goBenches(cfg.quick) {
			l, err := runGoBench(ctx, root, b, out)
			lines = append(lines, l...)
			if err != nil {
				errs[b.pkg] = err.Error()
				fmt.Fprintln(out, "error:", err)
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
		rep.Details["goBenchmarks"] = lines
	}
	if !cfg.skipped("webhook") {
		section(out, "P1 webhook load")
		if wh, err = runWebhook(ctx, cfg.webhook, out); err != nil {
			errs["webhook"] = err.Error()
			fmt.Fprintln(out, "error:", err)
		}
		rep.Details["webhook"] = wh
	}
	if !cfg.skipped("scheduler") {
		if sched, err = runSchedulerRuns(ctx, cfg.sched, out); err != nil {
			errs["scheduler"] = err.Error()
		}
		// Each topology's runs and its P2 judgement.
		rep.Details["scheduler"] = sched
	}
	if !cfg.skipped("rss") {
		section(out, "P4 publisher and extender memory")
		if rss, err = runRSS(ctx, cfg.rss, out); err != nil {
			errs["rss"] = err.Error()
			fmt.Fprintln(out, "error:", err)
		}
		rep.Details["rss"] = rss
	}
	if !cfg.skipped("scale") {
		section(out, "P4 publisher and extender on the real local API server")
		if scale, err = runScale(ctx, cfg.scale, out); err != nil {
			errs["scale"] = err.Error()
			fmt.Fprintln(out, "error:", err)
		}
		rep.Details["scale"] = scale
	}
	var rp *replayResult
	if !cfg.skipped("replay") {
		section(out, "R replay of the shared trace through the policy")
		if rp, err = runReplay(ctx, root, cfg.replay, out); err != nil {
			errs["replay"] = err.Error()
			fmt.Fprintln(out, "error:", err)
		}
		rep.Details["replay"] = rp
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	rep.Machine.LoadEnd = loadAverage()
	rep.Rows = append(buildRows(lines, wh, sched, rss, scale, errs), replayRows(rp, errs)...)
	section(out, "Results")
	renderTable(out, rep.Machine, rep.Rows)
	if cfg.output != "" {
		if err := writeJSON(cfg.output, rep); err != nil {
			return err
		}
		fmt.Fprintf(out, "wrote %s\n", cfg.output)
	}
	return nil
}

// why explains a missing measurement.
func why(errs map[string]string, key, fallback string) string {
	if e, ok := errs[key]; ok {
		return e
	}
	return fallback
}

// buildRows turns the measurements into the table, in the order of docs/design.md#performance-goals.
// Anything nil or absent becomes a missing row that says why.
func buildRows(lines []benchLine, wh *webhookResult, scheds []p2Set, rss *rssResult, scale *scaleResult, errs map[string]string) []row {
	var rows []row
	add := func(r row) { rows = append(rows, r.evaluate()) }
	notRun := "not run"
	bench := func(pkg, name, metric string) (float64, bool) {
		l, ok := findBench(lines, pkg, name)
		if !ok {
			return 0, false
		}
		v, ok := l.Metrics[metric]
		return v, ok
	}

	// P1
	const (
		p1Max = "webhook max throughput, HTTPS keep-alive, ~33 KB review"
		p1P99 = "webhook p99 latency at 2000 reviews/s"
		p1CPU = "webhook handler CPU per review (BenchmarkHandler/patch)"
	)
	if w, b := stepsOf(wh, 0); w != nil {
		add(goals.WebhookThroughput.on(row{ID: "P1", What: p1Max, Measured: w.Throughput, Baseline: b.Throughput, Unit: "req/s",
			Note: fmt.Sprintf("%d connections per server, client and servers share the machine's %d cores", wh.Conns, describeMachine().Cores)}))
	} else {
		add(missing("P1", p1Max, why(errs, "webhook", notRun+" (no max step)")))
	}
	if w, b := stepsOf(wh, 2000); w != nil {
		r := goals.WebhookP99.on(row{ID: "P1", What: p1P99, Measured: w.P99ms, Baseline: b.P99ms, Unit: "ms"})
		if w.Throughput < 0.95*2000 || w.Errors+w.Unsent > 0 {
			r.Note = fmt.Sprintf("achieved %.0f/s with %d errors and %d not sent in time", w.Throughput, w.Errors, w.Unsent)
		}
		add(r)
	} else {
		add(missing("P1", p1P99, why(errs, "webhook", notRun+" (no 2000/s step)")))
	}
	if v, ok := bench("/webhook", "BenchmarkHandler/patch", "cpu-ns/op"); ok {
		base, _ := bench("/webhook", "BenchmarkHandler/baseline", "cpu-ns/op")
		r := goals.WebhookCPU.on(row{ID: "P1", What: p1CPU, Measured: v / 1e6, Baseline: base / 1e6, Unit: "ms",
			Note: "process CPU (GC included) per review; baseline = BenchmarkHandler/baseline (reads the body only)"})
		if wh != nil {
			r.Note += fmt.Sprintf("; the load command's in-process measure: %.3f ms", wh.HandlerCPUms)
		}
		add(r)
	} else if wh != nil {
		add(goals.WebhookCPU.on(row{ID: "P1", What: "webhook handler CPU per review (in-process, load command)", Measured: wh.HandlerCPUms, Baseline: wh.BaselineCPUms,
			Unit: "ms"}))
	} else {
		add(missing("P1", p1CPU, why(errs, "./webhook/", notRun)))
	}
	if v, ok := bench("/webhook", "BenchmarkHandler/unchanged", "cpu-ns/op"); ok {
		add(row{ID: "P1", What: "webhook handler CPU per review, no patch needed (info)", Measured: v / 1e6, Unit: "ms"})
	}

	for _, r := range p2Rows(scheds, errs) {
		add(r)
	}

	// P3
	for _, c := range []struct {
		n    int
		goal goal
	}{{500, goals.Extender500}, {5000, goals.Extender5000}} {
		what := fmt.Sprintf("extender filter+prioritize server time p99, %d names, 30 pods/node", c.n)
		name := fmt.Sprintf("BenchmarkFilterPrioritize/nodes=%d", c.n)
		if v, ok := bench("/extender", name, "both-p99-ns"); ok {
			r := c.goal.on(row{ID: "P3", What: what, Measured: v / 1e6, Unit: "ms"})
			if cpu, ok := bench("/extender", name, "both-cpu-p99-ns"); ok {
				r.Note = fmt.Sprintf("CPU-time p99 %.3f ms (wall-clock p99 is what the goal uses)", cpu/1e6)
			}
			add(r)
		} else {
			add(missing("P3", what, why(errs, "./extender/", notRun)))
		}
	}

	// P4
	p4CPU := "publisher process CPU per cycle, 5000 nodes / 150,000 pods, decoding included"
	if rss != nil && rss.PublisherCycles > 0 {
		add(goals.PublisherCycleCPU.on(row{ID: "P4", What: p4CPU, Measured: rss.PublisherCPUPerCycle, Unit: "s",
			Note: fmt.Sprintf("real process (bench rss), garbage collection included: %d cycles, %d writes in %.0f s once ready (%s; a cycle lasts until its writes are done); pods, nodes and metrics in protobuf from the fake API",
				rss.PublisherCycles, rss.PublisherWrites, rss.ObserveSeconds, publisherRate(rss.PublisherQPS))}))
	} else {
		add(missing("P4", p4CPU, why(errs, "rss", notRun)))
	}
	if v, ok := bench("/publisher", "BenchmarkCycle/metrics=protobuf", "cpu-s/cycle"); ok {
		add(row{ID: "P4", What: "publisher Cycle CPU in the Go benchmark, metrics read as protobuf (info)", Measured: v, Unit: "s",
			Note: "BenchmarkCycle starts every cycle from a collected heap, so the cycle's garbage is mostly collected outside the measure: the process figure above is the one that counts"})
	}
	if v, ok := bench("/publisher", "BenchmarkCycle/metrics=memory", "cpu-s/cycle"); ok {
		add(row{ID: "P4", What: "publisher cycle CPU, metrics lists handed over decoded (info)", Measured: v, Unit: "s"})
	}
	if v, ok := bench("/publisher", "BenchmarkCycle/metrics=json", "cpu-s/cycle"); ok {
		add(row{ID: "P4", What: "publisher cycle CPU, metrics read as JSON, from a server that does not answer protobuf (info)", Measured: v, Unit: "s"})
	}
	if v, ok := bench("/policy", "BenchmarkComputeCluster/usage-max", "ms/cycle"); ok {
		add(row{ID: "P4", What: "policy computation alone, 5000 nodes x 30 pods, 20 samples (info)", Measured: v / 1000, Unit: "s"})
	}
	for _, noise := range []string{"3", "10"} {
		what := "publisher API writes per node per refresh interval, usage noise ±" + noise + "%"
		name := "BenchmarkCycleWrites/noise=" + noise + "%"
		v, ok := bench("/publisher", name, "writes/node/interval")
		if !ok {
			add(missing("P4", what, why(errs, "./publisher/", notRun)))
			continue
		}
		ann, _ := bench("/publisher", name, "with-annotation/node/interval")
		st, _ := bench("/publisher", name, "with-status/node/interval")
		n, _ := bench("/publisher", name, "writes")
		nodes, _ := bench("/publisher", name, "nodes")
		intervals, _ := bench("/publisher", name, "intervals")
		if nodes > 0 && intervals > 0 {
			// The printed figure has 4 digits; one write too many in 2,000 is not 1.000.
			v = n / (nodes * intervals)
		}
		add(goals.PublisherWrites.on(row{ID: "P4", What: what, Measured: v,
			Note: fmt.Sprintf("%.0f writes of %.0f nodes in %.0f refresh intervals (refreshes alone: %.0f), one patch of nodes/status per publish: %.2f carried the annotation, %.2f status values; steady state simulated 15x faster, every sample within ±%s%% of a constant usage", n, nodes, intervals, nodes*intervals, ann, st, noise)}))
	}
	p4RSS := "publisher and extender peak RSS at 5000 nodes / 150,000 pods"
	if v, ok := bench("/publisher", "BenchmarkCycle/metrics=memory", "heap-MB"); ok {
		add(row{ID: "P4", What: "publisher benchmark heap in use: stores, history, metrics lists (info)", Measured: v, Unit: "MB"})
	}
	if rss != nil {
		peakGoal := map[string]goal{"publisher": goals.PublisherPeak, "extender": goals.ExtenderPeak}
		for _, p := range rss.Processes {
			r := row{ID: "P4", What: fmt.Sprintf("%s peak RSS (start-up included), %d nodes / %d pods", p.Role, rss.Nodes, rss.Pods), Measured: p.PeakMB, Unit: "MB",
				Note: fmt.Sprintf("real process, deploy/default arguments (%s), against an in-process fake API server; watched %.0f s once ready (%s); at the end RSS %.0f MB (anonymous %.0f, live heap %s), highest sampled once ready %.0f",
					publisherRate(rss.PublisherQPS), rss.ObserveSeconds, historyIn(rss.ObserveSeconds), p.RSSMB, p.AnonMB, liveHeap(p.LiveHeapMB), p.MaxRSSMB)}
			if g, ok := peakGoal[p.Role]; ok {
				r = g.on(r)
			}
			add(r)
		}
		add(row{ID: "P4", What: fmt.Sprintf("publisher + extender RSS at the end, %d nodes / %d pods (info)", rss.Nodes, rss.Pods), Measured: rss.SumRSSMB, Unit: "MB"})
	} else {
		add(missing("P4", p4RSS, why(errs, "rss", notRun)))
	}
	p4Scale := "publisher and extender on the real local API server, 1000 kwok nodes / 20,000 pods"
	if scale != nil {
		peakGoal := map[string]goal{"publisher": goals.ScalePublisherPeak, "extender": goals.ScaleExtenderPeak}
		for _, p := range scale.Processes {
			r := row{ID: "P4", What: fmt.Sprintf("%s peak RSS (start-up included), real API server, %d kwok nodes / %d pods", p.Role, scale.Nodes, scale.Pods),
				Measured: p.EndPeakMiB, Unit: "MiB",
				Note: fmt.Sprintf("after start-up (ready in %.0f s): RSS %.0f MiB, peak %.0f MiB; ", p.ReadySeconds, p.StartRSSMiB, p.StartPeakMiB)}
			if scale.MidSeconds > 0 {
				r.Note += fmt.Sprintf("%.0f s later: RSS %.0f MiB; ", scale.MidSeconds, p.MidRSSMiB)
			}
			r.Note += fmt.Sprintf("%.0f s later: RSS %.0f MiB", scale.ObserveSeconds, p.EndRSSMiB)
			if g, ok := peakGoal[p.Role]; ok {
				r = g.on(r)
			}
			add(r)
		}
		if scale.PublisherCycles > 0 {
			add(goals.ScalePublisherCycleCPU.on(row{ID: "P4", What: fmt.Sprintf("publisher process CPU per cycle, real API server, %d kwok nodes / %d pods", scale.Nodes, scale.Pods), Measured: scale.PublisherCPU, Unit: "s",
				Note: fmt.Sprintf("%d cycles, %d writes in %.0f s after start-up (%s), started once the pods had settled; node status every %.0f s; metrics from metrics-server", scale.PublisherCycles, scale.PublisherWrites, scale.ObserveSeconds, refreshIn(scale.ObserveSeconds), scale.HeartbeatSeconds)}))
		}
	} else {
		add(missing("P4", p4Scale, why(errs, "scale", notRun)))
	}
	return rows
}

func stepsOf(r *webhookResult, target float64) (w, b *loadStep) {
	if r == nil {
		return nil, nil
	}
	return r.step(target)
}

// refreshIn says whether an observation of the publisher that starts after
// its first cycle is long enough to hold every node's refresh, the steady
// state's writes (due a refresh interval after the first cycle's, and
// written by the next cycle or the one after).
func refreshIn(observeSeconds float64) string {
	if observeSeconds >= (reclaimable.DefaultRefreshInterval + 30*time.Second).Seconds() {
		return "long enough for every node's refresh"
	}
	return "too short for every node's refresh: steady-state writes left out"
}

// publisherRate says at which rate `bench rss` let the publisher write.
func publisherRate(qps int) string {
	if qps > 0 {
		return fmt.Sprintf("publisher --kube-api-qps=%d: its writes come in bursts that the deployed rate spreads out", qps)
	}
	return "publisher at the deployed --kube-api-qps"
}

// historyIn says whether `bench rss` watched long enough for the publisher's
// usage history to fill, which its steady-state memory includes.
func historyIn(observeSeconds float64) string {
	if observeSeconds >= fullHistory().Seconds() {
		return "long enough for the publisher's usage history to fill"
	}
	return fmt.Sprintf("shorter than the publisher's %s of usage history: below its steady state", fullHistory())
}

// p2Rows are P2's rows, topology by topology: a row per run for what it
// measured (no goal of its own), then the topology's goal judged on the
// median of the runs. A topology that did not run has its goal's row,
// missing.
func p2Rows(sets []p2Set, errs map[string]string) []row {
	var rows []row
	for _, t := range topologies {
		i := slices.IndexFunc(sets, func(s p2Set) bool { return s.Topology == t })
		if i < 0 {
			rows = append(rows, missing("P2", fmt.Sprintf("scheduling throughput, %s topology: reclaimed pods %s / native pods", t, t.via()), why(errs, "scheduler", "not run")))
			continue
		}
		runs := sets[i].Runs
		what := fmt.Sprintf("scheduling throughput, %s topology: reclaimed pods %s vs native pods", t, t.via())
		nodes, pods := 0, 0
		for k, sched := range runs {
			what := fmt.Sprintf("%s, run %d of %d (info)", what, k+1, len(runs))
			if sched == nil {
				rows = append(rows, missing("P2", what, why(errs, "scheduler", "not run")))
				continue
			}
			nodes, pods = sched.Nodes, sched.Pods
			rows = append(rows, row{ID: "P2", What: fmt.Sprintf("%s, %d kwok nodes, %d pods each", what, sched.Nodes, sched.Pods), Relative: true,
				Measured: sched.Reclaimed.PodsPerSecond, Baseline: sched.Native.PodsPerSecond, Unit: "pods/s", Note: p2RunNote(sched)}.evaluate())
		}
		rows = append(rows, judgeP2(t, runs).row(nodes, pods))
	}
	return rows
}

// p2RunNote says what one run measured beside the rates: where the time and
// the CPU went.
func p2RunNote(sched *schedulerResult) string {
	var note string
	rc, nc := sched.Reclaimed.CPUPerPodMs, sched.Native.CPUPerPodMs
	if sched.Topology == topologyPlugin {
		note = fmt.Sprintf("kube-reclaim-scheduler (kube-scheduler with the placement plugin), reclaimed pods on profile %s (percentageOfNodesToScore %d), native pods on %s; the scheduler's CPU per reclaimed pod beyond a native one %.2f ms",
			extender.SchedulerName, sched.PercentageOfNodesToScore, corev1.DefaultSchedulerName, topologyPlugin.placementCPU(sched))
	} else {
		note = fmt.Sprintf("extender CPU per reclaimed pod %.2f ms; real kube-scheduler, reclaimed pods on profile %s (percentageOfNodesToScore %d), native pods on %s; extender --kube-api-qps=%d",
			rc[stack.Extender], extender.SchedulerName, sched.PercentageOfNodesToScore, corev1.DefaultSchedulerName, sched.ExtenderQPS)
	}
	if n := sched.Reclaimed.NodesPerCall; len(n) > 0 {
		note += "; nodes per extender call " + byVerb(n, "%.0f")
	}
	if m := sched.Reclaimed.ExtenderMeanMs; len(m) > 0 {
		note += "; extender mean server time " + byVerb(m, "%.2f ms")
	}
	note += fmt.Sprintf("; kube-scheduler algorithm time per pod reclaimed %.2f ms, native %.2f ms", sched.Reclaimed.AlgorithmMeanMs, sched.Native.AlgorithmMeanMs)
	if rc["all"] > 0 && nc["all"] > 0 {
		procs := []string{cluster.Scheduler, stack.Extender, cluster.APIServer}
		if sched.Topology == topologyPlugin {
			procs = []string{cluster.Scheduler, cluster.APIServer}
		}
		split := func(m map[string]float64) string {
			parts := make([]string, len(procs))
			for i, p := range procs {
				parts[i] = fmt.Sprintf("%s %.1f", p, m[p])
			}
			return strings.Join(parts, ", ")
		}
		note += fmt.Sprintf("; CPU per pod of every process on the machine beyond its background (%.2f cores) reclaimed %.1f ms (%s), native %.1f ms (%s)",
			sched.BackgroundCores["all"], rc["all"], split(rc), nc["all"], split(nc))
	}
	for _, p := range []phaseResult{sched.Reclaimed, sched.Native} {
		if p.Note != "" {
			note += "; " + p.Kind + ": " + p.Note
		}
	}
	return note
}
