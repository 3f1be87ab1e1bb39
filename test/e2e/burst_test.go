package e2e

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
	"github.com/kube-reclaim/kube-reclaim/test/stack"
)

const (
	burstPods     = 200
	burstCPU      = 1000
	burstMem      = 2 * gib
	burstObserve  = 100 * time.Second
	burstInterval = 400 * time.Millisecond
)

// scarceUsage leaves room for two or three burst pods per node.
func scarceUsage(i int) usage { return usage{7000 + 100*int64(i), 24 * gib} }

// Usage changes while the burst is scheduled: room shrinks under pods
// already bound on some nodes and grows (once the 1m window has passed) on
// others.
var burstChanges = []struct {
	at    time.Duration
	nodes []int
	delta int64 // millicores
}{
	{3 * time.Second, []int{0, 1, 2}, +2000},
	{8 * time.Second, []int{3, 4, 5}, -3000},
	{20 * time.Second, []int{6, 7}, +1000},
}

type burstSample struct {
	at  time.Time
	pub map[string]reclaimable.Resources
	st  framework.PodState
}

func (e *env) testBurst(t *testing.T) {
	ctx := context.Background()
	const ns = "burst"
	e.useNamespace(t, ns)
	t.Cleanup(func() { e.setUsage(t, func(int) usage { return defaultUsage }) })
	ext := e.s.HealthPort(stack.Extender)

	cur := make([]usage, len(e.nodes))
	for i := range cur {
		cur[i] = scarceUsage(i)
	}
	e.setUsage(t, scarceUsage)
	var notYet []string
	if took, ok := framework.Poll(2*time.Minute, time.Second, func() bool {
		notYet = notYet[:0]
		vs := mustViews(t, e)
		for i, n := range e.nodes {
			v := vs[n]
			want := e.expectedMax(v, cur[i])
			if !v.Fresh.Fresh || v.Published().CPUMilli > want.CPUMilli+cpuRateTol || v.Published().CPUMilli == 0 || !v.StatusMatchesAnnotation() {
				notYet = append(notYet, n)
			}
		}
		return len(notYet) == 0
	}); !ok {
		t.Fatalf("scarce usage not published on %v within %s", notYet, took.Round(time.Second))
	}
	room := 0
	for _, v := range mustViews(t, e) {
		room += int(v.Published().CPUMilli / burstCPU)
	}
	t.Logf("scarce room published: about %d burst pods fit (%dm/%s each), %d are coming", room, burstCPU, mib(burstMem), burstPods)

	success0 := framework.Scrape(t, ext, "kube_reclaim_extender_binds_total", "result", "success")
	conflict0 := framework.Scrape(t, ext, "kube_reclaim_extender_binds_total", "result", "conflict")
	expired0 := framework.Scrape(t, ext, "kube_reclaim_extender_assumptions_expired_total")

	var samples []burstSample
	sample := func() {
		vs, err := views(ctx, e.c, e.nodes)
		if err != nil {
			t.Logf("nodes: %v", err)
			return
		}
		st, err := framework.Pods(ctx, e.c, ns)
		if err != nil {
			t.Logf("pods: %v", err)
			return
		}
		pub := map[string]reclaimable.Resources{}
		for n, v := range vs {
			pub[n] = v.Published()
		}
		samples = append(samples, burstSample{at: time.Now(), pub: pub, st: st})
	}
	sample()
	pods := make([]*corev1.Pod, burstPods)
	for i := range pods {
		pods[i] = framework.ReclaimedPod(ns, fmt.Sprintf("burst-%03d", i), burstCPU, burstMem)
	}
	start := time.Now()
	framework.CreatePods(t, e.c, pods)
	t.Logf("%d pods created in %s", burstPods, time.Since(start).Round(100*time.Millisecond))
	next := 0
	for time.Since(start) < burstObserve {
		loopStart := time.Now()
		if next < len(burstChanges) && time.Since(start) >= burstChanges[next].at {
			ch := burstChanges[next]
			for _, i := range ch.nodes {
				cur[i].cpu += ch.delta
				if err := e.setNodeUsage(i, cur[i]); err != nil {
					t.Fatal(err)
				}
			}
			t.Logf("[%5.1fs] usage %+dm on nodes %v", time.Since(start).Seconds(), ch.delta, ch.nodes)
			next++
		}
		sample()
		time.Sleep(max(0, burstInterval-time.Since(loopStart)))
	}
	// Settle: no new bind for 10 s.
	lastBound, stableSince := -1, time.Now()
	for time.Since(stableSince) < 10*time.Second && time.Since(start) < burstObserve+time.Minute {
		sample()
		if b := len(samples[len(samples)-1].st.BoundTo); b != lastBound {
			lastBound, stableSince = b, time.Now()
		}
		time.Sleep(burstInterval)
	}
	// One more look after the last, so the last binds have a sample after them.
	time.Sleep(burstInterval)
	sample()

	// Every bind: the node's bookings including the new pod within what was
	// published at that moment. A bind seen at look k happened between looks
	// k-1 and k, and the extender may have acted on a value published just
	// after the node list of look k: compare with looks k-1, k and k+1.
	maxPub := map[string]reclaimable.Resources{}
	for _, s := range samples {
		for n, p := range s.pub {
			m := maxPub[n]
			maxPub[n] = reclaimable.Resources{CPUMilli: max(m.CPUMilli, p.CPUMilli), MemoryBytes: max(m.MemoryBytes, p.MemoryBytes)}
		}
	}
	checked, overBind, overMax := 0, 0, 0
	for k := 1; k < len(samples); k++ {
		s, prev := samples[k], samples[k-1]
		newOn := map[string][]string{}
		for p, n := range s.st.BoundTo {
			if _, was := prev.st.BoundTo[p]; !was {
				newOn[n] = append(newOn[n], p)
			}
		}
		for n, ps := range newOn {
			checked += len(ps)
			allowed := reclaimable.Resources{}
			for j := k - 1; j <= min(k+1, len(samples)-1); j++ {
				p := samples[j].pub[n]
				allowed = reclaimable.Resources{CPUMilli: max(allowed.CPUMilli, p.CPUMilli), MemoryBytes: max(allowed.MemoryBytes, p.MemoryBytes)}
			}
			b := s.st.Bookings[n]
			if b.CPUMilli > allowed.CPUMilli || b.MemoryBytes > allowed.MemoryBytes {
				overBind++
				t.Errorf("look %d (%.1fs): %v bound onto %s, which then held %dm/%s with only %dm/%s published",
					k, s.at.Sub(start).Seconds(), ps, n, b.CPUMilli, mib(b.MemoryBytes), allowed.CPUMilli, mib(allowed.MemoryBytes))
			}
		}
		for n, b := range s.st.Bookings {
			if m := maxPub[n]; b.CPUMilli > m.CPUMilli || b.MemoryBytes > m.MemoryBytes {
				overMax++
				t.Errorf("look %d: node %s holds %dm/%s, more than it ever published (%dm/%s)", k, n, b.CPUMilli, mib(b.MemoryBytes), m.CPUMilli, mib(m.MemoryBytes))
			}
		}
	}

	final := samples[len(samples)-1]
	success := framework.Scrape(t, ext, "kube_reclaim_extender_binds_total", "result", "success") - success0
	conflicts := framework.Scrape(t, ext, "kube_reclaim_extender_binds_total", "result", "conflict") - conflict0
	expired := framework.Scrape(t, ext, "kube_reclaim_extender_assumptions_expired_total") - expired0
	bound := len(final.st.BoundTo)
	var rows []string
	for _, n := range e.nodes {
		b := final.st.Bookings[n]
		rows = append(rows, fmt.Sprintf("%s: holds %dm (max published %dm, now %dm)", n, b.CPUMilli, maxPub[n].CPUMilli, final.pub[n].CPUMilli))
	}
	sort.Strings(rows)
	t.Logf("burst: %d looks in %s, %d binds checked against the value published at bind time; %d bound, %d Pending",
		len(samples), final.at.Sub(start).Round(100*time.Millisecond), checked, bound, len(final.st.Pending))
	t.Logf("per node:\n  %s", strings.Join(rows, "\n  "))
	t.Logf("extender: %v successful binds, %v conflicts (room gone at bind time), %v expired assumptions; over-booked binds %d, looks over the max published %d",
		success, conflicts, expired, overBind, overMax)
	if int(success) != bound {
		t.Errorf("extender counted %v successful binds, %d pods are bound: the difference is pods bound without its check or lost", success, bound)
	}
	if expired != 0 {
		t.Errorf("%v assumptions expired unconfirmed: the extender's room accounting lagged its own binds", expired)
	}
	if bound < 10 {
		t.Errorf("only %d pods bound: the burst did not exercise the extender", bound)
	}
	if len(final.st.Pending) < burstPods/2 {
		t.Errorf("%d pods Pending, want most of %d: the room was not scarce", len(final.st.Pending), burstPods)
	}
	if checked != bound {
		t.Errorf("%d binds checked, %d pods bound", checked, bound)
	}
}
