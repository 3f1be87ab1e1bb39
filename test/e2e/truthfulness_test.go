package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-reclaim/kube-reclaim/test/cluster"
)

// The usage trace, per node i: steady, a ramp of three steps, a spike, a drop.
// Every level stays long enough for metrics-server (10 s resolution, CPU as a
// rate between two scrapes) to report it in full.
var tracePhases = []struct {
	name  string
	at    time.Duration
	level func(i int) usage
}{
	{"steady", 0, traceBase},
	{"ramp-1", 20 * time.Second, func(i int) usage { return traceRamp(i, 1) }},
	{"ramp-2", 50 * time.Second, func(i int) usage { return traceRamp(i, 2) }},
	{"ramp-3", 80 * time.Second, func(i int) usage { return traceRamp(i, 3) }},
	{"spike", 110 * time.Second, func(i int) usage {
		u := traceRamp(i, 3)
		return usage{u.cpu + 5000, u.mem + 12*gib}
	}},
	{"drop", 145 * time.Second, func(int) usage { return usage{500, 2 * gib} }},
}

const traceEnd = 185 * time.Second

func traceBase(i int) usage { return usage{1000 + 150*int64(i), 4*gib + int64(i)*gib/2} }

func traceRamp(i, step int) usage {
	b := traceBase(i)
	return usage{b.cpu + 600*int64(step), b.mem + 2*gib*int64(step)}
}

// Sampling: every poll reads NodeMetrics and the nodes. The lag budget is
// one publish period plus one poll of ~2 s; polling every second keeps the
// measurement's own error inside that poll.
const (
	tracePoll   = time.Second
	lagPoll     = 2 * time.Second
	lagBudget   = period + lagPoll
	cpuRateTol  = 25 // millicores: metrics-server's CPU is a counter rate
	memGaugeTol = 1 << 20
)

// traceLevel is one usage level of one node and what became of it.
type traceLevel struct {
	phase string
	u     usage
	set   time.Time
	// reported is the first poll at which metrics-server showed the level in full.
	reported time.Time
	// followed is the first poll at or after reported at which the published
	// value was within what the level allows.
	followed time.Time
	rise     bool
}

type nodeTrace struct {
	levels []*traceLevel
	// established indexes the newest level reported at least lagBudget ago:
	// the one the published value is held to.
	established int
}

func (e *env) testTruthfulness(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: a 3-minute usage trace")
	}
	ctx := context.Background()
	t.Cleanup(func() { e.setUsage(t, func(int) usage { return defaultUsage }) })
	traces := make([]*nodeTrace, len(e.nodes))
	for i := range traces {
		// The usage in force before the trace is established: setup waited
		// for it to be published.
		traces[i] = &nodeTrace{levels: []*traceLevel{{phase: "before", u: defaultUsage, set: time.Now().Add(-time.Hour),
			reported: time.Now().Add(-time.Hour), followed: time.Now().Add(-time.Hour)}}}
	}
	type worst struct {
		v    int64
		desc string
	}
	overCPU, overMem := worst{v: -1 << 62}, worst{v: -1 << 62}
	violations, samples := 0, 0
	start := time.Now()
	next := 0
	for time.Since(start) < traceEnd {
		loopStart := time.Now()
		if next < len(tracePhases) && time.Since(start) >= tracePhases[next].at {
			ph := tracePhases[next]
			for i := range e.nodes {
				u := ph.level(i)
				prev := traces[i].levels[len(traces[i].levels)-1]
				set := time.Now()
				if err := e.setNodeUsage(i, u); err != nil {
					t.Fatal(err)
				}
				traces[i].levels = append(traces[i].levels, &traceLevel{phase: ph.name, u: u, set: set, rise: u.cpu > prev.u.cpu})
			}
			t.Logf("[%5.1fs] %s: node 0 at %s, node 9 at %s", time.Since(start).Seconds(), ph.name, ph.level(0), ph.level(9))
			next++
		}

		nm, err := e.c.Metrics.MetricsV1beta1().NodeMetricses().List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Logf("NodeMetrics: %v", err)
		}
		vs, err := views(ctx, e.c, e.nodes)
		if err != nil {
			t.Logf("nodes: %v", err)
			time.Sleep(tracePoll)
			continue
		}
		now := time.Now()
		samples++
		reportedCPU := map[string]int64{}
		reportedMem := map[string]int64{}
		if nm != nil {
			for _, m := range nm.Items {
				reportedCPU[m.Name] = m.Usage.Cpu().MilliValue()
				reportedMem[m.Name] = m.Usage.Memory().Value()
			}
		}
		for i, n := range e.nodes {
			tr, v := traces[i], vs[n]
			cur := tr.levels[len(tr.levels)-1]
			if cur.reported.IsZero() {
				if cpu, ok := reportedCPU[n]; ok && now.After(cur.set) &&
					abs(cpu-(cur.u.cpu+cluster.NodeBaselineCPUMilli)) <= 30 &&
					abs(reportedMem[n]-(cur.u.mem+cluster.NodeBaselineMemoryBytes)) <= 2<<20 {
					cur.reported = now
				}
			}
			if !cur.reported.IsZero() && now.Sub(cur.reported) >= lagBudget {
				tr.established = len(tr.levels) - 1
			}
			if v.Ann == nil {
				violations++
				t.Errorf("[%5.1fs] %s: no valid annotation: %q", now.Sub(start).Seconds(), n, v.Raw)
				continue
			}
			pub := v.Published()
			tolCPU := cpuRateTol + int64(decreaseThreshold*float64(pub.CPUMilli))
			tolMem := memGaugeTol + int64(decreaseThreshold*float64(pub.MemoryBytes))
			for _, l := range tr.levels {
				if !l.reported.IsZero() && l.followed.IsZero() {
					if b := e.expectedMax(v, l.u); pub.CPUMilli <= b.CPUMilli+tolCPU && pub.MemoryBytes <= b.MemoryBytes+tolMem {
						l.followed = now
					}
				}
			}
			ref := tr.levels[tr.established]
			b := e.expectedMax(v, ref.u)
			oc, om := pub.CPUMilli-b.CPUMilli, pub.MemoryBytes-b.MemoryBytes
			desc := fmt.Sprintf("%s at %.1fs: published %dm/%s, usage %s (%s) allows %dm/%s", n, now.Sub(start).Seconds(),
				pub.CPUMilli, mib(pub.MemoryBytes), ref.u, ref.phase, b.CPUMilli, mib(b.MemoryBytes))
			if oc > overCPU.v {
				overCPU = worst{oc, desc}
			}
			if om > overMem.v {
				overMem = worst{om, desc}
			}
			if oc > tolCPU || om > tolMem {
				violations++
				if violations <= 10 {
					t.Errorf("over what usage allows (tolerance %dm/%s): %s", tolCPU, mib(tolMem), desc)
				}
			}
		}
		time.Sleep(max(0, tracePoll-time.Since(loopStart)))
	}

	// Lag: every rise of usage, from metrics-server reporting it in full to
	// the published value following it.
	var worstLag, worstSpike time.Duration
	var worstLagDesc string
	var reportDelays []time.Duration
	rises, unreported := 0, 0
	for i, tr := range traces {
		for _, l := range tr.levels[1:] {
			if !l.reported.IsZero() {
				reportDelays = append(reportDelays, l.reported.Sub(l.set))
			}
			if !l.rise {
				continue
			}
			rises++
			switch {
			case l.reported.IsZero():
				unreported++
				t.Logf("%s %s (%s): metrics-server never reported it in full before the next change", e.nodes[i], l.phase, l.u)
				continue
			case l.followed.IsZero():
				t.Errorf("%s %s (%s): the published value never followed (reported %s after the change)", e.nodes[i], l.phase, l.u, l.reported.Sub(l.set).Round(100*time.Millisecond))
				continue
			}
			lag := l.followed.Sub(l.reported)
			if lag > worstLag {
				worstLag, worstLagDesc = lag, fmt.Sprintf("%s %s", e.nodes[i], l.phase)
			}
			if l.phase == "spike" && lag > worstSpike {
				worstSpike = lag
			}
			if lag > lagBudget {
				t.Errorf("%s %s (%s): published followed %s after metrics-server reported it, want <= %s (one period + one poll)",
					e.nodes[i], l.phase, l.u, lag.Round(100*time.Millisecond), lagBudget)
			}
		}
	}
	if unreported > rises/4 {
		t.Errorf("metrics-server reported only %d of %d usage rises in full: the trace checks too little", rises-unreported, rises)
	}
	var maxDelay, sumDelay time.Duration
	for _, d := range reportDelays {
		maxDelay = max(maxDelay, d)
		sumDelay += d
	}
	t.Logf("trace: %d polls x %d nodes, %d usage rises (%d reported in full by metrics-server), %d violations",
		samples, len(e.nodes), rises, rises-unreported, violations)
	if len(reportDelays) > 0 {
		t.Logf("metrics-server reported a new level in full %s after it was set on average, at worst %s",
			(sumDelay / time.Duration(len(reportDelays))).Round(100*time.Millisecond), maxDelay.Round(100*time.Millisecond))
	}
	t.Logf("worst lag from metrics-server reporting a rise to the published value following it: %s (%s); worst for the spike: %s; budget %s",
		worstLag.Round(100*time.Millisecond), worstLagDesc, worstSpike.Round(100*time.Millisecond), lagBudget)
	t.Logf("worst CPU overshoot over what usage allows: %dm (%s)", overCPU.v, overCPU.desc)
	t.Logf("worst memory overshoot over what usage allows: %d bytes = %s (%s)", overMem.v, mib(overMem.v), overMem.desc)
	if samples < int(traceEnd/tracePoll)/2 {
		t.Errorf("only %d polls in %s", samples, traceEnd)
	}
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
