package extender

import (
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// The cached verdict must always equal what reclaimable.Judge says right now
// (its values clamped to the node's allocatable), whatever the order of
// instants and lease flips it is asked at.
func TestCachedVerdictAgreesWithJudge(t *testing.T) {
	const staleAfter = 10 * time.Minute
	written := t0
	a := reclaimable.Annotation{CPUMilli: 1000, MemoryBytes: gi, Policy: "usage", WriteTime: written}
	value, _ := a.Marshal()
	entries := map[string]*nodeEntry{
		"fresh-annotation":  {annotation: value, present: true, allocatable: req(4000, 4*gi)},
		"above-allocatable": {annotation: value, present: true, allocatable: req(500, 2*gi)},
		"missing":           {},
		"malformed":         {annotation: "{", present: true},
	}
	// Instants around every boundary of Judge, visited in random order.
	var instants []time.Time
	for _, base := range []time.Time{written.Add(-staleAfter), written, written.Add(staleAfter)} {
		for _, d := range []time.Duration{-time.Hour, -time.Second, -1, 0, 1, time.Second, time.Hour} {
			instants = append(instants, base.Add(d))
		}
	}
	rng := rand.New(rand.NewPCG(7, 7))
	for name, e := range entries {
		for range 2000 {
			now := instants[rng.IntN(len(instants))]
			alive := rng.IntN(4) != 0
			got := e.judge(now, now.UnixNano(), alive, staleAfter)
			want := reclaimable.Judge(e.annotation, e.present, now, staleAfter, alive)
			want.Values = clampTo(want.Values, e.allocatable)
			if got.Fresh != want.Fresh || got.Reason != want.Reason || got.Values != want.Values {
				t.Fatalf("%s at written%+v alive=%v: cached {%v %q %+v}, Judge {%v %q %+v}", name, now.Sub(written), alive,
					got.Fresh, got.Reason, got.Values, want.Fresh, want.Reason, want.Values)
			}
		}
	}
}

func TestPodRecordKeepsOnlyWhatIsNeeded(t *testing.T) {
	p := pod("p", "n1", 1500, 2*gi)
	initRes := corev1.ResourceList{testNames.CPU: *resource.NewQuantity(3000, resource.DecimalSI), testNames.Memory: *resource.NewQuantity(gi, resource.BinarySI)}
	p.Spec.InitContainers = []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{
		Requests: initRes, Limits: initRes.DeepCopy()}}}
	p.Labels = map[string]string{"big": "label"}
	enforced(p)
	p.ResourceVersion = "5"
	got := podRecords(testNames)(p)
	want := &podRecord{namespace: "batch", name: "p", uid: "uid-p", resourceVersion: "5", nodeName: "n1", schedulerName: SchedulerName, req: req(3000, 2*gi)}
	if r := got.(*podRecord); *r != *want {
		t.Errorf("record = %+v, want %+v", *r, *want)
	}
	// Idempotent: a record passes through unchanged.
	if again := podRecords(testNames)(got); again != got {
		t.Error("converting a record is not the identity")
	}
	if done := podRecords(testNames)(withPhase(pod("q", "n1", 1, 1), corev1.PodSucceeded)); !done.(*podRecord).terminal {
		t.Error("succeeded pod not marked terminal")
	}
	if bare := podRecords(testNames)(pod("q", "n1", 1, 1)); !strings.Contains(bare.(*podRecord).unenforced, `container "main": no explicit requests.cpu`) {
		t.Errorf("a pod without the webhook's limits: unenforced = %q, want what it lacks", bare.(*podRecord).unenforced)
	}
}

// Node and pod events in any order leave sums that match a recount.
func TestCacheSumsMatchRecount(t *testing.T) {
	c := newNodeCache(10*time.Minute, 30*time.Second, nil, newMetrics(prometheus.NewRegistry()))
	c.now = func() time.Time { return t0 }
	rng := rand.New(rand.NewPCG(3, 4))
	nodes := []string{"a", "b", "c"}
	live := map[string]*podRecord{} // uid → current record
	for i := range 5000 {
		uid := string(rune('A' + rng.IntN(40)))
		switch rng.IntN(5) {
		case 0:
			if p, ok := live[uid]; ok {
				c.deletePod(p)
				delete(live, uid)
			}
		case 1:
			c.setNode(&nodeRecord{name: nodes[rng.IntN(3)], annotation: "x", present: i%2 == 0})
		default:
			p := &podRecord{namespace: "ns", name: uid, uid: podUID(uid), req: req(rng.Int64N(3)*100, rng.Int64N(3)*mi),
				terminal: rng.IntN(6) == 0}
			if rng.IntN(3) > 0 {
				p.nodeName = nodes[rng.IntN(3)]
			}
			c.setPod(p)
			live[uid] = p
		}
	}
	want := map[string]reclaimable.Resources{}
	for _, p := range live {
		if p.nodeName != "" && !p.terminal {
			want[p.nodeName] = want[p.nodeName].Add(p.req)
		}
	}
	for _, n := range nodes {
		var got reclaimable.Resources
		if e := c.nodes[n]; e != nil {
			got = e.used
		}
		if got != want[n] {
			t.Errorf("node %s: used %+v, recount %+v", n, got, want[n])
		}
	}
}

func podUID(s string) types.UID { return types.UID(s) }
