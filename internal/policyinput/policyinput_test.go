package policyinput

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/kube-reclaim/kube-reclaim/internal/testobj"
	"github.com/kube-reclaim/kube-reclaim/policy"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

func names(t *testing.T) reclaimable.Names {
	t.Helper()
	n, err := reclaimable.NewNames(reclaimable.DefaultDomain)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func list(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

func pod(name string, phase corev1.PodPhase, req corev1.ResourceList) *corev1.Pod {
	return testobj.MakePod().Namespace("ns").Name(name).UID("uid-" + name).Node("n1").
		Resources(corev1.ResourceRequirements{Requests: req, Limits: req}).Phase(phase).Obj()
}

func nodeMetrics(name string, at time.Time, cpu, mem string) metricsv1beta1.NodeMetrics {
	return metricsv1beta1.NodeMetrics{ObjectMeta: metav1.ObjectMeta{Name: name}, Timestamp: metav1.NewTime(at), Usage: list("cpu", cpu, "memory", mem)}
}

func podMetrics(name string, at time.Time, cpu, mem string) metricsv1beta1.PodMetrics {
	return metricsv1beta1.PodMetrics{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Timestamp: metav1.NewTime(at),
		Containers: []metricsv1beta1.ContainerMetrics{{Name: "a", Usage: list("cpu", cpu, "memory", mem)}, {Name: "b", Usage: list("cpu", cpu, "memory", mem)}}}
}

func TestNodeAssemblesWhatThePolicyReads(t *testing.T) {
	n := names(t)
	t0 := time.Unix(1_700_000_000, 0).UTC()
	node := testobj.MakeNode().Name("n1").Capacity("8", "16Gi").Allocatable("7500m", "15Gi").Obj()
	regular := pod("regular", corev1.PodRunning, list("cpu", "1", "memory", "1Gi"))
	regular.Status.StartTime = &metav1.Time{Time: t0.Add(-time.Hour)}
	batch := pod("batch", corev1.PodRunning, list(string(n.CPU), "1500", string(n.Memory), "2048"))
	done := pod("done", corev1.PodSucceeded, list("cpu", "3", string(n.CPU), "700"))
	failed := pod("failed", corev1.PodFailed, list(string(n.CPU), "900"))
	pending := pod("pending", corev1.PodPending, list("cpu", "250m"))

	a := New(n)
	a.Resize(10*time.Minute, MinScrapeInterval)
	for i := range 3 {
		at := t0.Add(time.Duration(i) * 15 * time.Second)
		if got := a.AddNodeMetrics([]metricsv1beta1.NodeMetrics{nodeMetrics("n1", at, "2", "3Gi")}); got != 1 {
			t.Fatalf("sample %d: %d new node samples, want 1", i, got)
		}
		a.AddPodMetrics([]metricsv1beta1.PodMetrics{podMetrics("regular", at, "100m", "1Mi"), podMetrics("batch", at, "300m", "2Mi")})
	}
	// metrics-server serves the same reading until its next scrape.
	if got := a.AddNodeMetrics([]metricsv1beta1.NodeMetrics{nodeMetrics("n1", t0.Add(30*time.Second), "9", "9Gi")}); got != 0 {
		t.Errorf("a repeated reading added %d samples", got)
	}

	var pods []*Pod
	for _, p := range []*corev1.Pod{regular, batch, done, failed, pending} {
		pods = append(pods, NewPod(n, p))
	}
	in, held := a.Node(node.Name, Resources(node.Status.Capacity), Resources(node.Status.Allocatable), pods)

	if in.Name != "n1" || in.Allocatable != (reclaimable.Resources{CPUMilli: 7500, MemoryBytes: 15 << 30}) ||
		in.Capacity != (reclaimable.Resources{CPUMilli: 8000, MemoryBytes: 16 << 30}) {
		t.Errorf("node = %s cap %+v alloc %+v", in.Name, in.Capacity, in.Allocatable)
	}
	if held != (reclaimable.Resources{CPUMilli: 1500, MemoryBytes: 2048}) {
		t.Errorf("held = %+v, want the live reclaimed pod's requests only", held)
	}
	if len(in.Samples) != 3 || in.Samples[2].CPUMilli != 2000 || !in.Samples[2].Time.Equal(t0.Add(30*time.Second)) {
		t.Errorf("node samples = %+v", in.Samples)
	}
	want := map[string]struct {
		reclaimed bool
		requests  reclaimable.Resources
		samples   int
		cpu       int64
	}{
		"regular": {false, reclaimable.Resources{CPUMilli: 1000, MemoryBytes: 1 << 30}, 3, 200},
		"batch":   {true, reclaimable.Resources{}, 3, 600},
		"pending": {false, reclaimable.Resources{CPUMilli: 250}, 0, 0},
	}
	if len(in.Pods) != len(want) {
		t.Fatalf("pods = %+v, want the three live ones", in.Pods)
	}
	for _, p := range in.Pods {
		w, ok := want[p.Name]
		if !ok {
			t.Errorf("terminal pod %s reached the policy", p.Name)
			continue
		}
		samples := podSamples(a, p)
		if p.Reclaimed != w.reclaimed || p.Requests != w.requests || len(samples) != w.samples || p.UID != "uid-"+p.Name {
			t.Errorf("pod %s = %+v, samples %v", p.Name, p, samples)
		}
		if w.samples > 0 && samples[0].CPUMilli != w.cpu {
			t.Errorf("pod %s usage %d, want the sum of its containers %d", p.Name, samples[0].CPUMilli, w.cpu)
		}
	}
	if !in.Pods[0].StartTime.Equal(t0.Add(-time.Hour)) {
		t.Errorf("start time = %v", in.Pods[0].StartTime)
	}
}

// podSamples reads what the policy reads of an assembled pod: its series in
// the history (Node leaves Samples empty).
func podSamples(a *Assembler, p policy.Pod) []policy.Sample {
	if len(p.Samples) > 0 {
		return p.Samples
	}
	out, _ := a.History().AppendPodSeries(nil, p.Series)
	return out
}

// appendPod reads a pod's series by key, as the Assembler does the first time.
func appendPod(h *policy.History, dst []policy.Sample, key []byte) []policy.Sample {
	out, _ := h.AppendPodSeries(dst, h.FindPod(key))
	return out
}

// The pod record keeps its series between periods; once the history forgot
// the pod (it stopped reporting), the series it reports with again is read.
func TestNodeReadsThePodsCurrentSeriesAfterTheHistoryForgotIt(t *testing.T) {
	a := New(names(t))
	a.Resize(time.Minute, MinScrapeInterval)
	t0 := time.Unix(1_700_000_000, 0).UTC()
	rec := NewPod(names(t), pod("p", corev1.PodRunning, nil))
	podCPU := func(in policy.Node) []int64 {
		var out []int64
		for _, s := range podSamples(a, in.Pods[0]) {
			out = append(out, s.CPUMilli)
		}
		return out
	}
	a.AddPodMetrics([]metricsv1beta1.PodMetrics{podMetrics("p", t0, "1", "1Gi")})
	a.Node("n1", reclaimable.Resources{}, reclaimable.Resources{}, []*Pod{rec}) // the record keeps the series from here on
	a.AddPodMetrics([]metricsv1beta1.PodMetrics{podMetrics("p", t0.Add(15*time.Second), "2", "1Gi")})
	in, _ := a.Node("n1", reclaimable.Resources{}, reclaimable.Resources{}, []*Pod{rec})
	if !slices.Equal(podCPU(in), []int64{2000, 4000}) {
		t.Fatalf("pod samples %v, want both (two containers each)", podCPU(in))
	}
	a.Prune(t0.Add(time.Hour))
	a.AddPodMetrics([]metricsv1beta1.PodMetrics{podMetrics("p", t0.Add(time.Hour), "3", "1Gi")})
	if in, _ = a.Node("n1", reclaimable.Resources{}, reclaimable.Resources{}, []*Pod{rec}); !slices.Equal(podCPU(in), []int64{6000}) {
		t.Errorf("pod samples after it reported again %v, want the new one", podCPU(in))
	}
}

func TestNodeSeriesSurviveTheNextNodeInTheScratchBuffer(t *testing.T) {
	a := New(names(t))
	a.Resize(time.Hour, MinScrapeInterval)
	t0 := time.Unix(1_700_000_000, 0)
	a.AddNodeMetrics([]metricsv1beta1.NodeMetrics{nodeMetrics("a", t0, "1", "1Gi"), nodeMetrics("b", t0, "2", "2Gi")})
	in, _ := a.Node("a", reclaimable.Resources{}, reclaimable.Resources{}, nil)
	got := policy.Compute(&in, policy.DefaultSettings(), t0, time.Minute)
	if got.MetricsTime.IsZero() || in.Samples[0].CPUMilli != 1000 {
		t.Fatalf("node a: %+v", in.Samples)
	}
	// The policy reads one node at a time; the buffer is reused afterwards.
	in2, _ := a.Node("b", reclaimable.Resources{}, reclaimable.Resources{}, nil)
	if in2.Samples[0].CPUMilli != 2000 {
		t.Errorf("node b: %+v", in2.Samples)
	}
}

func TestResizeKeepsTheSamplesWithinTheNewAge(t *testing.T) {
	a := New(names(t))
	t0 := time.Unix(1_700_000_000, 0)
	a.Resize(time.Hour, MinScrapeInterval)
	for i := range 30 {
		a.AddNodeMetrics([]metricsv1beta1.NodeMetrics{nodeMetrics("a", t0.Add(time.Duration(i)*time.Minute), "1", "1Gi")})
	}
	times := func() []time.Duration {
		var out []time.Duration
		for _, s := range a.History().AppendNode(nil, "a") {
			out = append(out, s.Time.Sub(t0))
		}
		return out
	}
	a.Resize(time.Hour, MinScrapeInterval)
	if got := len(times()); got != 30 {
		t.Errorf("same age: %d samples, want all 30 kept", got)
	}
	a.Resize(10*time.Minute, MinScrapeInterval)
	if got := times(); len(got) != 11 || got[0] != 19*time.Minute || got[10] != 29*time.Minute {
		t.Errorf("shorter age: samples at %v, want the 11 from 19m to 29m", got)
	}
	a.Resize(2*time.Hour, MinScrapeInterval)
	a.AddNodeMetrics([]metricsv1beta1.NodeMetrics{nodeMetrics("a", t0.Add(30*time.Minute), "1", "1Gi")})
	if got := times(); len(got) != 12 || got[0] != 19*time.Minute || got[11] != 30*time.Minute {
		t.Errorf("longer age again: samples at %v, want the 11 kept and the new one", got)
	}
}

func TestNodeWithoutHistoryHasNoSamples(t *testing.T) {
	n := names(t)
	in, _ := New(n).Node("a", reclaimable.Resources{}, reclaimable.Resources{}, []*Pod{NewPod(n, pod("p", corev1.PodRunning, nil))})
	if len(in.Samples) != 0 || len(in.Pods) != 1 || len(in.Pods[0].Samples) != 0 || in.Pods[0].Series != (policy.PodSeries{}) {
		t.Errorf("in = %+v", in)
	}
}

// TestHistoryAgeKeepsEverySampleThePolicyReads computes random nodes from a
// history that forgets nothing and from one kept for HistoryAge, pruned at
// the evaluation instant as the publisher prunes it: the results must be the
// same, and the same again when the pods' series are read in place
// (policy.Pod.Series) rather than copied out. A history one scrape shorter
// must change some of them, or the test could not tell.
func TestHistoryAgeKeepsEverySampleThePolicyReads(t *testing.T) {
	rng := rand.New(rand.NewPCG(14, 2026))
	t0 := time.Unix(1_800_000_000, 0)
	alloc := reclaimable.Resources{CPUMilli: 64_000, MemoryBytes: 256 << 30}
	shorterDiffers := 0
	for c := range 400 {
		cfg := policy.Default()
		cfg.Default.Window = time.Duration(1+rng.IntN(8)) * time.Minute
		cfg.Default.SampleAlignment = time.Duration(1+rng.IntN(20)) * time.Second
		if rng.IntN(2) == 0 {
			cfg.Default.Policy = policy.PolicyMaxUsageRequest
		}
		if rng.IntN(2) == 0 {
			cfg.Default.Peak = policy.Peak(95_000)
		}
		stale := time.Duration(30+rng.IntN(240)) * time.Second
		step := time.Duration(10+rng.IntN(20)) * time.Second
		age := HistoryAge(cfg, stale)
		full, kept, shorter := policy.NewHistory(time.Hour, 1000), policy.NewHistory(age, 1000), policy.NewHistory(age-step, 1000)
		histories := []*policy.History{full, kept, shorter}

		const pods = 4
		stops := rng.IntN(20) // the last pod's metrics stop after this many scrapes
		var last time.Time
		for i := 0; i < 20*60/int(step/time.Second); i++ {
			at := t0.Add(time.Duration(i) * step)
			last = at
			node := policy.Sample{Time: at, CPUMilli: 20_000 + rng.Int64N(40_000), MemoryBytes: 64<<30 + rng.Int64N(128<<30)}
			for _, h := range histories {
				h.AddNode("n", node)
			}
			for p := range pods {
				if p == pods-1 && i > stops {
					continue
				}
				s := policy.Sample{Time: at.Add(time.Duration(rng.IntN(31)-15) * time.Second), CPUMilli: rng.Int64N(8_000), MemoryBytes: rng.Int64N(32 << 30)}
				for _, h := range histories {
					h.AddPod([]byte(fmt.Sprint(p)), s)
				}
			}
		}
		now := last.Add(time.Duration(rng.Int64N(int64(stale))))
		results := make([]policy.Result, len(histories))
		for i, h := range histories {
			h.Prune(now)
			in := policy.Node{Name: "n", Allocatable: alloc, Capacity: alloc, Samples: h.AppendNode(nil, "n")}
			for p := range pods {
				in.Pods = append(in.Pods, policy.Pod{Namespace: "ns", Name: fmt.Sprint(p), UID: fmt.Sprint(p),
					Requests: reclaimable.Resources{CPUMilli: 2_000, MemoryBytes: 8 << 30}, Reclaimed: p == 0,
					StartTime: t0.Add(-time.Hour), Samples: appendPod(h, nil, []byte(fmt.Sprint(p)))})
			}
			settings, _ := cfg.For(nil)
			results[i] = policy.Compute(&in, settings, now, stale)
			if h == kept {
				// The publisher's way: the pods' series read where they
				// are kept.
				for p := range in.Pods {
					in.Pods[p].Samples, in.Pods[p].Series = nil, h.FindPod([]byte(fmt.Sprint(p)))
				}
				if got := policy.Compute(&in, settings, now, stale); !reflect.DeepEqual(got, results[i]) {
					t.Fatalf("case %d: read through PodSeries\n%+v\nread from Samples\n%+v", c, got, results[i])
				}
			}
		}
		if !reflect.DeepEqual(results[0], results[1]) {
			t.Fatalf("case %d (window %s, alignment %s, stale %s, now %s after the last scrape): kept for %s the history gives\n%+v\nforgetting nothing\n%+v",
				c, cfg.Default.Window, cfg.Default.SampleAlignment, stale, now.Sub(last), age, results[1], results[0])
		}
		if !reflect.DeepEqual(results[0], results[2]) {
			shorterDiffers++
		}
	}
	if shorterDiffers == 0 {
		t.Error("a history one scrape shorter than HistoryAge never changed a result: the test cannot tell")
	}
	t.Logf("a history one scrape shorter changed %d of 400 results", shorterDiffers)
}
