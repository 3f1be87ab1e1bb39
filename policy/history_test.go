package policy

import (
	"math"
	"slices"
	"testing"
	"time"
	"unsafe"
)

// appendPod reads a pod's series by key, as the Assembler does the first time.
func appendPod(h *History, dst []Sample, key []byte) []Sample {
	out, _ := h.AppendPodSeries(dst, h.FindPod(key))
	return out
}

func TestPodSeriesReadsThePodUntilTheHistoryForgetsIt(t *testing.T) {
	for _, tc := range []struct {
		name   string
		forget func(h *History)
	}{
		{"pruned when it stopped reporting", func(h *History) { h.Prune(now.Add(time.Hour)) }},
		{"deleted", func(h *History) { h.DeletePod("ns/p") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := NewHistory(10*time.Minute, 10)
			key := []byte("ns/p")
			if ps := h.FindPod(key); ps != (PodSeries{}) {
				t.Fatalf("a pod without samples has a series")
			}
			if _, ok := h.AppendPodSeries(nil, PodSeries{}); ok {
				t.Errorf("the zero PodSeries reads as a series")
			}
			h.AddPod(key, smp(20, 2, 20))
			ps := h.FindPod(key)
			h.AddPod(key, smp(10, 3, 30)) // a sample added after FindPod
			got, ok := h.AppendPodSeries(nil, ps)
			if want := []Sample{smp(20, 2, 20), smp(10, 3, 30)}; !ok || !slices.Equal(got, want) {
				t.Fatalf("through the handle: %v %v, want %v", got, ok, want)
			}
			tc.forget(h)
			if got, ok := h.AppendPodSeries([]Sample{smp(5, 9, 9)}, ps); ok || len(got) != 1 {
				t.Errorf("a forgotten series reads %v, %v", got, ok)
			}
			// The pod reports again: a new series, which the old handle
			// does not reach, and a new lookup does.
			h.AddPod(key, smp(0, 4, 40))
			if _, ok := h.AppendPodSeries(nil, ps); ok {
				t.Errorf("the old handle reads the new series")
			}
			if got, ok := h.AppendPodSeries(nil, h.FindPod(key)); !ok || !slices.Equal(got, []Sample{smp(0, 4, 40)}) {
				t.Errorf("the new series: %v %v", got, ok)
			}
		})
	}
}

func TestHistory(t *testing.T) {
	t.Run("samples come back oldest first", func(t *testing.T) {
		h := NewHistory(10*time.Minute, 10)
		for _, s := range []Sample{smp(30, 1, 10), smp(20, 2, 20), smp(10, 3, 30)} {
			if !h.AddNode("n", s) {
				t.Errorf("sample %v was not new", s.Time)
			}
		}
		want := []Sample{smp(30, 1, 10), smp(20, 2, 20), smp(10, 3, 30)}
		if got := h.AppendNode(nil, "n"); !slices.Equal(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
	t.Run("a repeated or older sample is dropped", func(t *testing.T) {
		h := NewHistory(10*time.Minute, 10)
		h.AddPod([]byte("u"), smp(20, 2, 20))
		if h.AddPod([]byte("u"), smp(20, 5, 50)) {
			t.Errorf("the same timestamp was added twice")
		}
		if h.AddPod([]byte("u"), smp(30, 1, 10)) {
			t.Errorf("an older sample was added")
		}
		if got := appendPod(h, nil, []byte("u")); !slices.Equal(got, []Sample{smp(20, 2, 20)}) {
			t.Errorf("got %v", got)
		}
	})
	t.Run("the history keeps no reference to the caller's key", func(t *testing.T) {
		h := NewHistory(10*time.Minute, 10)
		key := []byte("ns/p")
		if !h.AddPod(key, smp(20, 2, 20)) || !h.AddPod(key, smp(10, 3, 30)) {
			t.Errorf("two new samples of ns/p were not both added")
		}
		key[3] = 'q'
		want := []Sample{smp(20, 2, 20), smp(10, 3, 30)}
		if got := appendPod(h, nil, []byte("ns/p")); !slices.Equal(got, want) {
			t.Errorf("AppendPod = %v, want %v", got, want)
		}
		if got := appendPod(h, nil, []byte("ns/q")); got != nil {
			t.Errorf("the caller's buffer named a second series: %v", got)
		}
	})
	t.Run("sub-second times are rounded down to the second", func(t *testing.T) {
		h := NewHistory(10*time.Minute, 10)
		h.AddNode("n", Sample{Time: ago(10).Add(900 * time.Millisecond), CPUMilli: 1})
		if h.AddNode("n", Sample{Time: ago(10).Add(950 * time.Millisecond), CPUMilli: 2}) {
			t.Errorf("a sample in the same second was added")
		}
		if got := h.AppendNode(nil, "n"); !got[0].Time.Equal(ago(10)) {
			t.Errorf("time %v, want %v", got[0].Time, ago(10))
		}
	})
	t.Run("at most maxCount samples are kept, the newest ones", func(t *testing.T) {
		h := NewHistory(time.Hour, 3)
		for i := 10; i >= 1; i-- {
			h.AddNode("n", smp(i*10, int64(i), 0))
		}
		want := []Sample{smp(30, 3, 0), smp(20, 2, 0), smp(10, 1, 0)}
		if got := h.AppendNode(nil, "n"); !slices.Equal(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
	t.Run("samples older than maxAge before the newest are dropped on add", func(t *testing.T) {
		h := NewHistory(60*time.Second, 100)
		h.AddNode("n", smp(100, 1, 0))
		h.AddNode("n", smp(70, 2, 0))
		h.AddNode("n", smp(40, 3, 0)) // 100 s old sample is 60 s older: kept; none dropped
		h.AddNode("n", smp(39, 4, 0)) // now the 100 s one is 61 s older: dropped
		want := []Sample{smp(70, 2, 0), smp(40, 3, 0), smp(39, 4, 0)}
		if got := h.AppendNode(nil, "n"); !slices.Equal(got, want) {
			t.Errorf("got %v, want %v", got, want)
		}
	})
	t.Run("prune drops old samples and forgets empty series", func(t *testing.T) {
		h := NewHistory(60*time.Second, 100)
		h.AddNode("gone", smp(120, 1, 0))
		h.AddNode("n", smp(90, 1, 0))
		h.AddNode("n", smp(30, 2, 0))
		h.AddPod([]byte("gone"), smp(61, 1, 0))
		h.AddPod([]byte("p"), smp(60, 1, 0))
		h.Prune(now)
		if nodes, pods := h.Len(); nodes != 1 || pods != 1 {
			t.Errorf("Len = %d nodes, %d pods; want 1, 1", nodes, pods)
		}
		if got := h.AppendNode(nil, "n"); !slices.Equal(got, []Sample{smp(30, 2, 0)}) {
			t.Errorf("node samples %v", got)
		}
		if got := appendPod(h, nil, []byte("p")); !slices.Equal(got, []Sample{smp(60, 1, 0)}) {
			t.Errorf("pod samples %v", got)
		}
	})
	t.Run("prune goes through pod series once a quarter of the age", func(t *testing.T) {
		// maxAge 60 s: pods are gone through at most every 15 s, nodes on
		// every call.
		h := NewHistory(60*time.Second, 100)
		h.AddPod([]byte("p"), smp(50, 1, 0))
		h.Prune(now) // the first call goes through the pods
		h.AddNode("n", smp(50, 1, 0))
		for s := 1; s < 15; s++ {
			// p's only sample is 50+s s old: too old from 11 s on.
			h.Prune(now.Add(time.Duration(s) * time.Second))
			if nodes, pods := h.Len(); pods != 1 || (s > 10) != (nodes == 0) {
				t.Fatalf("%d s later: %d nodes, %d pods; want the pod kept, the node only until 10 s", s, nodes, pods)
			}
		}
		h.Prune(now.Add(15 * time.Second))
		if _, pods := h.Len(); pods != 0 {
			t.Errorf("a quarter of the age later the stopped pod is still kept")
		}
		if got := appendPod(h, nil, []byte("p")); len(got) != 0 {
			t.Errorf("the pruned pod reads %v", got)
		}
	})
	t.Run("delete forgets a node or a pod", func(t *testing.T) {
		h := NewHistory(time.Minute, 10)
		h.AddNode("n", smp(1, 1, 1))
		h.AddPod([]byte("p"), smp(1, 1, 1))
		h.DeleteNode("n")
		h.DeletePod("p")
		if nodes, pods := h.Len(); nodes != 0 || pods != 0 {
			t.Errorf("Len = %d, %d", nodes, pods)
		}
		if got := h.AppendNode([]Sample{smp(5, 5, 5)}, "n"); len(got) != 1 {
			t.Errorf("append of an unknown node changed dst: %v", got)
		}
	})
	t.Run("values outside the compact range are clamped", func(t *testing.T) {
		h := NewHistory(time.Minute, 10)
		h.AddNode("neg", smp(1, -5, -5))
		h.AddNode("big", smp(1, math.MaxInt64, math.MaxInt64))
		if got := h.AppendNode(nil, "neg"); got[0].CPUMilli != 0 || got[0].MemoryBytes != 0 {
			t.Errorf("negative values stored as %v", got[0])
		}
		if got := h.AppendNode(nil, "big"); got[0].CPUMilli != cpuMax || got[0].MemoryBytes != memMax*1024 {
			t.Errorf("large values stored as %v, want %d m / %d bytes", got[0], cpuMax, memMax*1024)
		}
	})
	t.Run("a sample and a series header stay compact", func(t *testing.T) {
		// The history is most of a publisher's heap: 150,000 pods at 5,000
		// nodes have a header and a ring of some 22 entries each.
		if got := unsafe.Sizeof(entry{}); got != 10 {
			t.Errorf("entry takes %d bytes, want 10", got)
		}
		if got := unsafe.Sizeof(series{}); got != 32 {
			t.Errorf("series header takes %d bytes, want 32", got)
		}
	})
	t.Run("the compact sample keeps usage, never stores less", func(t *testing.T) {
		const tib = int64(1) << 40
		for _, tc := range []struct {
			name             string
			cpu, mem         int64
			wantCPU, wantMem int64
		}{
			{"small values exactly", 1, 1, 1, 1},
			{"a pod's usage exactly", 250, 3<<30 + 7, 250, 3<<30 + 7},
			{"the largest CPU exactly", cpuMax, 0, cpuMax, 0},
			{"memory just below 2 TiB exactly", 4000, 2*tib - 1, 4000, 2*tib - 1},
			{"memory of 2 TiB in KiB", 0, 2 * tib, 0, 2 * tib},
			{"memory above 2 TiB rounded up to KiB", 0, 24*tib + 1, 0, 24*tib + 1024},
			{"CPU beyond the range is the largest", cpuMax + 1, 5, cpuMax, 5},
		} {
			t.Run(tc.name, func(t *testing.T) {
				h := NewHistory(time.Minute, 10)
				h.AddPod([]byte("p"), smp(1, tc.cpu, tc.mem))
				got := appendPod(h, nil, []byte("p"))
				if len(got) != 1 || got[0].CPUMilli != tc.wantCPU || got[0].MemoryBytes != tc.wantMem {
					t.Errorf("stored %d m / %d bytes as %v, want %d m / %d bytes", tc.cpu, tc.mem, got, tc.wantCPU, tc.wantMem)
				}
			})
		}
	})
	t.Run("resize keeps the newest samples within the new limits", func(t *testing.T) {
		h := NewHistory(time.Hour, 20)
		for i := 1; i <= 20; i++ {
			h.AddPod([]byte("p"), smp(100-i, int64(i), 0))
		}
		h.Resize(time.Hour, 5)
		got := appendPod(h, nil, []byte("p"))
		if len(got) != 5 || got[0].CPUMilli != 16 || got[4].CPUMilli != 20 {
			t.Fatalf("after shrinking to 5 samples: %v, want the 5 newest", got)
		}
		// The ring still works at its new size, and grows again.
		h.AddPod([]byte("p"), smp(79, 21, 0))
		if got := appendPod(h, nil, []byte("p")); len(got) != 5 || got[0].CPUMilli != 17 || got[4].CPUMilli != 21 {
			t.Fatalf("a sample after the shrink: %v, want 17..21", got)
		}
		h.Resize(time.Hour, 8)
		for i := 22; i <= 25; i++ {
			h.AddPod([]byte("p"), smp(100-i, int64(i), 0))
		}
		if got := appendPod(h, nil, []byte("p")); len(got) != 8 || got[0].CPUMilli != 18 || got[7].CPUMilli != 25 {
			t.Fatalf("after growing to 8 samples: %v, want 18..25", got)
		}
		h.Resize(2*time.Second, 8)
		if got := appendPod(h, nil, []byte("p")); len(got) != 3 || got[0].CPUMilli != 23 {
			t.Fatalf("after shrinking the age to 2 s: %v, want 23..25", got)
		}
	})
	t.Run("the ring keeps order across wrap-arounds and growth", func(t *testing.T) {
		h := NewHistory(time.Hour, 7)
		var want []Sample
		for i := 100; i >= 1; i-- {
			s := smp(i, int64(i), int64(2*i))
			h.AddPod([]byte("p"), s)
			want = append(want, s)
			if len(want) > 7 {
				want = want[1:]
			}
			if got := appendPod(h, nil, []byte("p")); !slices.Equal(got, want) {
				t.Fatalf("after %d samples got %v, want %v", 101-i, got, want)
			}
		}
	})
	t.Run("times survive the wrap of the 16 bits an entry keeps", func(t *testing.T) {
		wrap := (int64(1_795_000_000)/65536 + 1) * 65536
		h := NewHistory(5*time.Minute, 40)
		var want []Sample
		for i := range 8 {
			s := Sample{Time: time.Unix(wrap-45+int64(i)*15, 0).UTC(), CPUMilli: int64(i), MemoryBytes: int64(i)}
			h.AddPod([]byte("p"), s)
			want = append(want, s)
		}
		if got := appendPod(h, nil, []byte("p")); !slices.Equal(got, want) {
			t.Errorf("across %d: got %v, want %v", wrap, got, want)
		}
		h.Prune(time.Unix(wrap+270, 0)) // the cutoff falls on the second sample
		if got := appendPod(h, nil, []byte("p")); len(got) != 7 || !got[0].Time.Equal(want[1].Time) {
			t.Errorf("pruned 270 s after %d: got %v, want all but the first", wrap, got)
		}
	})
	t.Run("a history keeps at most MaxHistoryAge", func(t *testing.T) {
		base := int64(1_795_000_000)
		h := NewHistory(24*time.Hour, 100)
		var want []Sample
		for _, at := range []int64{0, 4464, 4465, 40000, 65535, 70000} {
			s := Sample{Time: time.Unix(base+at, 0).UTC(), CPUMilli: at}
			h.AddNode("n", s)
			want = append(want, s)
		}
		if got := h.AppendNode(nil, "n"); !slices.Equal(got, want[2:]) {
			t.Errorf("got %v, want the samples no more than %s before the newest: %v", got, MaxHistoryAge, want[2:])
		}
	})
	t.Run("a ring is sized from the spacing of its samples", func(t *testing.T) {
		// The defaults: 310 s of history, room for a 10 s scrape interval.
		for _, tc := range []struct {
			name     string
			every    int
			holds    int16
			maxSlots int
		}{
			{"15 s: 21 samples in the 224-byte size class", 15, 21, 22},
			{"10 s: the most the history keeps (33, in the 352-byte class)", 10, 32, 35},
			{"60 s: 6 samples in the 80-byte class", 60, 6, 8},
		} {
			t.Run(tc.name, func(t *testing.T) {
				h := NewHistory(310*time.Second, 33)
				for i := range 60 {
					h.AddPod([]byte("p"), Sample{Time: time.Unix(int64(1000+i*tc.every), 0), CPUMilli: int64(i)})
				}
				s := h.pods["p"]
				if s.n != tc.holds || cap(s.buf) > tc.maxSlots {
					t.Errorf("holds %d samples in %d slots, want %d in at most %d", s.n, cap(s.buf), tc.holds, tc.maxSlots)
				}
			})
		}
	})
	t.Run("history feeds Compute", func(t *testing.T) {
		h := NewHistory(10*time.Minute, 40)
		h.AddNode("n", smp(30, 3000, 6000))
		h.AddNode("n", smp(15, 2500, 5000))
		h.AddPod([]byte("uid-r"), smp(30, 1500, 2000))
		h.AddPod([]byte("uid-r"), smp(15, 1000, 1000))
		n := Node{Name: "n", Allocatable: alloc4k10k, Samples: h.AppendNode(nil, "n"),
			Pods: []Pod{reclaimedPod("r")}}
		n.Pods[0].Samples = appendPod(h, nil, []byte(n.Pods[0].UID))
		r := Compute(&n, testSettings(), now, 2*time.Minute)
		// regular 1500 / 4000: 4000-1400-1500 = 1100; 10000-3500-4000 = 2500
		if r.CPUMilli != 1100 || r.MemoryBytes != 2500 {
			t.Errorf("got %d / %d, want 1100 / 2500", r.CPUMilli, r.MemoryBytes)
		}
	})
}
