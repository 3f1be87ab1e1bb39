package replay

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/kube-reclaim/kube-reclaim/eviction"
	"github.com/kube-reclaim/kube-reclaim/policy"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

const (
	mi = int64(1) << 20
	gi = int64(1) << 30
)

var smallNode = reclaimable.Resources{CPUMilli: 4000, MemoryBytes: 8 * gi}

func readTestdata(t *testing.T, name string, node reclaimable.Resources) *Trace {
	t.Helper()
	tr, err := ReadFile("testdata/"+name, Options{Node: node})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

func TestReadAppliesEveryQuirkRuleAndCountsIt(t *testing.T) {
	tr := readTestdata(t, "quirks.csv", smallNode)
	// Line by line (testdata/quirks.csv, steps of 5m from 22:15):
	//  2: a step 0, measured.
	//  3: a step 1, memory 0: missing, repeats 512Mi.
	//  4: a step 2, no CPU request: dropped; step 2 is a gap, repeating 700m/512Mi.
	//  5: a at +890s: realigned to step 3; 2 CPUs above the 1 requested: clamped.
	//  6: a step 3 again: merged, the larger of each (1000m, 600Mi).
	//  7: a step 5: requests change to 2 CPUs (1500m within them); 2Gi above 1Gi:
	//     clamped; step 4 a gap.
	//  8: b, no request: dropped, b has no usable row.
	//  9: c requests 100 CPUs, more than a node: left out.
	want := Quirks{Rows: 8, ZeroRequestRows: 2, MemoryMissingRows: 1, CPUAboveRequestRows: 1, MemoryAboveRequestRows: 1,
		MergedRows: 1, RealignedRows: 1, RequestChanges: 1, GapSteps: 2, PodsWithoutUsableRow: 1, PodsTooLarge: 1}
	if tr.Quirks != want {
		t.Errorf("quirks\n got %+v\nwant %+v", tr.Quirks, want)
	}
	if tr.Steps != 6 || !tr.Start.Equal(time.Unix(1700000100, 0)) {
		t.Errorf("steps %d from %s, want 6 from 22:15", tr.Steps, tr.Start)
	}
	if len(tr.Pods) != 2 || tr.Pods[0].Name != "a" || tr.Pods[1].Name != "c" {
		t.Fatalf("pods %v, want a and c", tr.Pods)
	}
	a := tr.Pods[0]
	if wantReq := (reclaimable.Resources{CPUMilli: 2000, MemoryBytes: gi}); a.Requests != wantReq {
		t.Errorf("a requests %v, want the largest %v", a.Requests, wantReq)
	}
	if want := []int64{500, 700, 700, 1000, 1000, 1500}; !reflect.DeepEqual(a.CPU, want) {
		t.Errorf("a CPU %v, want %v", a.CPU, want)
	}
	if want := []int64{512 * mi, 512 * mi, 512 * mi, 600 * mi, 600 * mi, gi}; !reflect.DeepEqual(a.Memory, want) {
		t.Errorf("a memory %v, want %v", a.Memory, want)
	}
	if want := []uint8{kindMeasured, kindMemoryMissing, kindGap, kindMeasured, kindGap, kindMeasured}; !reflect.DeepEqual(a.Kind, want) {
		t.Errorf("a kinds %v, want %v", a.Kind, want)
	}
	if tr.Pods[1].Node != -1 || a.Node != 0 || len(tr.Nodes) != 1 {
		t.Errorf("c on %d, a on %d of %d nodes; want c left out, a on the one node", tr.Pods[1].Node, a.Node, len(tr.Nodes))
	}
}

func TestReadAcceptsGzip(t *testing.T) {
	data, err := os.ReadFile("testdata/quirks.csv")
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(data)
	_ = zw.Close()
	plain, err := Read(bytes.NewReader(data), Options{Node: smallNode})
	if err != nil {
		t.Fatal(err)
	}
	zipped, err := Read(&buf, Options{Node: smallNode})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(plain, zipped) {
		t.Error("the gzip'd file reads differently from the plain one")
	}
}

func TestReadRejectsAMalformedRowNamingItsLine(t *testing.T) {
	const header = "pod,time,cpu_request,memory_request,cpu_usage,memory_usage"
	for _, tc := range []struct{ name, csv, want string }{
		{"usage not a quantity", header + "\na,1700000100,1,1Gi,500m,1Gi\na,1700000400,1,1Gi,x,1Gi\n", `line 3: cpu_usage: "x" is not a quantity`},
		{"negative request", header + "\na,1700000100,-1,1Gi,500m,1Gi\n", "line 2: cpu_request: -1 is negative"},
		{"column missing", header + "\na,1700000100,1\n", "line 2: 3 fields, column memory_request missing"},
		{"bad time", header + "\na,yesterday,1,1Gi,1,1Gi\n", `line 2: time: "yesterday" is neither Unix seconds nor RFC 3339`},
		{"empty pod", header + "\n,1700000100,1,1Gi,1,1Gi\n", "line 2: pod: empty"},
		{"unknown header", "a,b,c\n1,2,3\n", "line 1: unknown header"},
		{"empty file", "", "line 1: the file is empty"},
		{"broken quoting", header + "\n\"a,1700000100,1,1Gi,1,1Gi\n", "line 2"},
		{"node on some rows only", header + ",node\na,1700000100,1,1Gi,1,1Gi,n1\nb,1700000100,1,1Gi,1,1Gi,\n", "line 3: node: empty"},
		{"pod moves", header + ",node\na,1700000100,1,1Gi,1,1Gi,n1\na,1700000400,1,1Gi,1,1Gi,n2\n", "line 3: pod a on node \"n2\""},
		{"bitbrains not a number", strings.Join(bitbrainsColumns, ",") + "\n1,1375308176,2,5852,abc,8388608,1308620\n", `line 2: cpu_used_mhz: "abc"`},
		{"no usable row", header + "\na,1700000100,0,0,0,0\n", "no usable row"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Read(strings.NewReader(tc.csv), Options{Node: smallNode})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

func TestReadConvertsBitbrainsMHzAndKB(t *testing.T) {
	// 2 cores at 2926 MHz each: 747 MHz used is 747/2926 of a core, 256
	// millicores rounded up; 8388608 KB is 8 GiB.
	csv := strings.Join(bitbrainsColumns, ",") + "\n1,1375308176,2,5852,747,8388608,1308620\n"
	tr, err := Read(strings.NewReader(csv), Options{Node: reclaimable.Resources{CPUMilli: 8000, MemoryBytes: 64 * gi}})
	if err != nil {
		t.Fatal(err)
	}
	p := tr.Pods[0]
	if want := (reclaimable.Resources{CPUMilli: 2000, MemoryBytes: 8 * gi}); p.Requests != want {
		t.Errorf("requests %v, want %v", p.Requests, want)
	}
	if p.CPU[0] != 256 || p.Memory[0] != 1308620*1024 {
		t.Errorf("usage %dm %d bytes, want 256m %d", p.CPU[0], p.Memory[0], 1308620*1024)
	}
}

func TestPackIsFirstFitDecreasingNeverBeyondAllocatable(t *testing.T) {
	// Node 4 CPUs/8Gi. By larger share, then smaller share: p2 (.75/.5),
	// p1 (.75/.25), p5 (.5/.25), p3 (.25/.25), p4 (.25/.125).
	// p2 opens node-001; p1 (3 CPUs) does not fit beside it: node-002; p5
	// fills node-001 exactly (4 CPUs, 8Gi); p3 fits node-002 (4 CPUs, 3Gi);
	// p4 fits neither: node-003.
	tr := readTestdata(t, "packing.csv", smallNode)
	var got [][]string
	for _, n := range tr.Nodes {
		var names []string
		for _, i := range n.Pods {
			names = append(names, tr.Pods[i].Name)
		}
		got = append(got, append([]string{n.Name}, names...))
	}
	want := [][]string{{"node-001", "p2", "p5"}, {"node-002", "p1", "p3"}, {"node-003", "p4"}}
	if !reflect.DeepEqual(got, want) || !tr.Packed {
		t.Errorf("packed %v (packed=%v), want %v", got, tr.Packed, want)
	}
}

// exactSettings publish allocatable minus the newest usage sample, every
// change: room = 10 - usage, by hand.
func exactSettings() policy.Settings {
	s := policy.DefaultSettings()
	s.Window = time.Minute
	s.ChangeThreshold = 0
	s.CPU = policy.ResourceSettings{Margin: 0, MaxRatio: 1}
	s.Memory = policy.ResourceSettings{Margin: 0, MaxRatio: 1}
	return s
}

// traceOf is a one-pod trace on a node of 10 CPUs and 10Gi: the pod
// requests the whole node and uses cpu[k] CPUs and mem[k] Gi at step k
// (5m steps).
func traceOf(t *testing.T, cpu, mem []int64) *Trace {
	t.Helper()
	var b strings.Builder
	b.WriteString("pod,time,cpu_request,memory_request,cpu_usage,memory_usage,node\n")
	for k := range cpu {
		fmt.Fprintf(&b, "web,%d,10,10Gi,%d,%dGi,n1\n", 1700000100+300*k, cpu[k], mem[k])
	}
	tr, err := Read(strings.NewReader(b.String()), Options{Node: reclaimable.Resources{CPUMilli: 10000, MemoryBytes: 10 * gi}})
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// exactConfig writes every decrease, runs batch jobs for 8h, places pods
// of at most 2 CPUs and 4.5Gi and evicts nothing: what is measured is what
// batch pods hold, whatever the room does.
func exactConfig() Config {
	cfg := DefaultConfig()
	cfg.DecreaseThreshold = 0
	cfg.Period = 5 * time.Minute
	cfg.BatchLifetime = 8 * time.Hour
	cfg.BatchPod = reclaimable.Resources{CPUMilli: 2000, MemoryBytes: 9 * gi / 2}
	cfg.Eviction.Mode = eviction.ModeOff
	// Batch pods from the first step: the figures of the tests count them.
	cfg.WarmUp = 0
	return cfg
}

func TestRunMeasuresWhatBatchPodsHold(t *testing.T) {
	// The room written at each step is 10 - usage (exactSettings). At step
	// 0 it is 8 CPUs and 9Gi: four batch pods of 2 CPUs and 2.25Gi fill it
	// and keep it to the end, since nothing evicts them.
	for _, tc := range []struct {
		name     string
		cpu, mem []int64
		modify   func(*Config, *Trace)
		want     Measures
	}{{
		// CPU 2, 2, 5, 6, 7, 2: intervals 1..5 judge usage + 8 held:
		// 10 ok; 13, 14, 15 over by 3, 4, 5; 10 ok. The room fell to 5, 4
		// and 3 meanwhile, which the published measure would have used.
		// Shortfall 12 of 40 granted; unused 8+5+4+3+8 = 28, all of it held
		// and usable (min(8, unused)); the room in force 8+8+5+4+3 = 28.
		name: "CPU over what is held although the room fell",
		cpu:  []int64{2, 2, 5, 6, 7, 2}, mem: []int64{1, 1, 1, 1, 1, 1},
		want: Measures{NodeIntervals: 5, CPUShortfall: 0.3, BatchPodHours: 20.0 / 12, Writes: 6,
			CPU: ResourceMeasures{MeanRoom: 5600, MeanHeld: 8000, ReclaimedShare: 1, PublishedShare: 1, Violations: 3, ViolationRate: 0.6,
				MeanExcess: 0.4, MaxExcess: 0.5, Episodes: 1, MeanEpisode: "15m0s", LongestEpisode: "15m0s", meanSteps: 3, maxSteps: 3},
			Memory: ResourceMeasures{MeanRoom: float64(9 * gi), MeanHeld: float64(9 * gi), ReclaimedShare: 1, PublishedShare: 1,
				MeanEpisode: "0s", LongestEpisode: "0s"}},
	}, {
		// Memory 1, 1, 6, 1, 1, 1 against 9Gi held: one interval at 15Gi,
		// over by 5Gi, is regular harm; unused 9+4+9+9+9 = 40, usable
		// 9+4+9+9+9 (min(9, unused)) = 40; room in force 9, 9, 4, 9, 9.
		// Writes: the first, what is held, the decrease, the increase and
		// the refresh 10m later.
		name: "memory over what is held is regular harm",
		cpu:  []int64{2, 2, 2, 2, 2, 2}, mem: []int64{1, 1, 6, 1, 1, 1},
		want: Measures{NodeIntervals: 5, BatchPodHours: 20.0 / 12, Writes: 5, RegularHarm: 1, RegularHarmRate: 0.2,
			CPU: ResourceMeasures{MeanRoom: 8000, MeanHeld: 8000, ReclaimedShare: 1, PublishedShare: 1, MeanEpisode: "0s", LongestEpisode: "0s"},
			Memory: ResourceMeasures{MeanRoom: float64(8 * gi), MeanHeld: float64(9 * gi), ReclaimedShare: 1, PublishedShare: 1,
				Violations: 1, ViolationRate: 0.2, MeanExcess: 0.5, MaxExcess: 0.5, Episodes: 1, MeanEpisode: "5m0s", LongestEpisode: "5m0s",
				meanSteps: 1, maxSteps: 1}},
	}, {
		// Jobs of 10m: the four placed at step 0 complete at step 2, four
		// more run from 2 to 4, four more from 4: 8 completed, 4 pods held
		// over each of the 5 intervals. What is held, as the publisher sees
		// it before placing, changes at every step: 6 writes.
		name: "batch jobs complete after their lifetime and are replaced",
		cpu:  []int64{2, 2, 2, 2, 2, 2}, mem: []int64{1, 1, 1, 1, 1, 1},
		modify: func(c *Config, _ *Trace) { c.BatchLifetime = 10 * time.Minute },
		want: Measures{NodeIntervals: 5, BatchPodHours: 20.0 / 12, Writes: 6, Completed: 8,
			CPU: ResourceMeasures{MeanRoom: 8000, MeanHeld: 8000, ReclaimedShare: 1, PublishedShare: 1, MeanEpisode: "0s", LongestEpisode: "0s"},
			Memory: ResourceMeasures{MeanRoom: float64(9 * gi), MeanHeld: float64(9 * gi), ReclaimedShare: 1, PublishedShare: 1,
				MeanEpisode: "0s", LongestEpisode: "0s"}},
	}, {
		// No sample reaches the publisher at steps 2 and 3: the room is a
		// stale zero in force over intervals 3 and 4, the status stays at
		// what is held (the floor), the pods stay, and the room is back at
		// step 4. Room in force 8, 8, 0, 0, 8 of unused 8 x 5.
		name: "a metrics outage zeroes the room and keeps the batch pods",
		cpu:  []int64{2, 2, 2, 2, 2, 2}, mem: []int64{1, 1, 1, 1, 1, 1},
		modify: func(c *Config, tr *Trace) {
			c.Outages = []Outage{{From: tr.Start.Add(10 * time.Minute), To: tr.Start.Add(20 * time.Minute)}}
			c.Eviction.Mode = eviction.ModeOn
		},
		want: Measures{NodeIntervals: 5, BatchPodHours: 20.0 / 12, Writes: 4, StaleIntervals: 2,
			CPU: ResourceMeasures{MeanRoom: 4800, MeanHeld: 8000, ReclaimedShare: 1, PublishedShare: 0.6, MeanEpisode: "0s", LongestEpisode: "0s"},
			Memory: ResourceMeasures{MeanRoom: float64(27*gi) / 5, MeanHeld: float64(9 * gi), ReclaimedShare: 1, PublishedShare: 0.6,
				MeanEpisode: "0s", LongestEpisode: "0s"}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			tr := traceOf(t, tc.cpu, tc.mem)
			cfg := exactConfig()
			if tc.modify != nil {
				tc.modify(&cfg, tr)
			}
			s := exactSettings()
			rep, err := Run(context.Background(), tr, []Contender{{Name: "exact", Settings: &s}}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			got := rep.Results[0].Cluster
			roundFloats(&got, &tc.want)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("measures\n got %+v\nwant %+v", got, tc.want)
			}
			if n := rep.Results[0].Nodes; len(n) != 1 || !reflect.DeepEqual(n[0].Measures, rep.Results[0].Cluster) {
				t.Errorf("the one node's measures %+v differ from the cluster's", n)
			}
			if _, err := json.Marshal(rep); err != nil {
				t.Errorf("the report does not encode: %v", err)
			}
		})
	}
}

// roundFloats sets got's floats to want's where they agree to 1e-12.
func roundFloats(got, want *Measures) {
	for _, p := range [][2]*float64{{&got.CPUShortfall, &want.CPUShortfall}, {&got.BatchPodHours, &want.BatchPodHours},
		{&got.CPU.MeanExcess, &want.CPU.MeanExcess}, {&got.Memory.MeanExcess, &want.Memory.MeanExcess},
		{&got.EvictionsPer100PodHours, &want.EvictionsPer100PodHours}, {&got.Memory.MeanRoom, &want.Memory.MeanRoom}} {
		if math.Abs(*p[0]-*p[1]) < 1e-12*max(1, math.Abs(*p[1])) {
			*p[0] = *p[1]
		}
	}
}

func TestRunFillsTheRoomWithPodsOfAtMostTheBatchShape(t *testing.T) {
	// Room 8 CPUs and 9Gi (usage 2 CPUs, 1Gi). Pods of at most 2 CPUs and
	// 4.5Gi: four (8 ÷ 2 beats 9 ÷ 4.5), each 2 CPUs and 2.25Gi. Pods of
	// at most 3 CPUs and 1Gi: nine (9 ÷ 1 beats 8 ÷ 3), 1Gi each, the CPU
	// shared as 889m for eight of them and 888m for the last. Pods of 16
	// CPUs and 16Gi: none, the room waits.
	for _, tc := range []struct {
		name  string
		shape reclaimable.Resources
		pods  int
	}{
		{"CPU decides", reclaimable.Resources{CPUMilli: 2000, MemoryBytes: 9 * gi / 2}, 4},
		{"memory decides", reclaimable.Resources{CPUMilli: 3000, MemoryBytes: gi}, 9},
		{"larger than the room", reclaimable.Resources{CPUMilli: 16000, MemoryBytes: 16 * gi}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := exactConfig()
			cfg.BatchPod = tc.shape
			s := exactSettings()
			rep, err := Run(context.Background(), traceOf(t, []int64{2, 2}, []int64{1, 1}), []Contender{{Name: "exact", Settings: &s}}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			tl := rep.Results[0].Timeline
			wantHeld := reclaimable.Resources{CPUMilli: 8000, MemoryBytes: 9 * gi}
			if tc.pods == 0 {
				wantHeld = reclaimable.Resources{}
			}
			if tl.Held[0] != wantHeld {
				t.Errorf("held %v, want the room %v", tl.Held[0], wantHeld)
			}
			if got := rep.Results[0].Cluster.BatchPodHours * 12; math.Round(got) != float64(tc.pods) {
				t.Errorf("%v pods over the one interval, want %d", got, tc.pods)
			}
		})
	}
}

func TestRunEvictsOnMeasuredMemoryPressureOnly(t *testing.T) {
	// Batch pods hold 8 CPUs and 6Gi from step 0 (a memory margin of 30 %:
	// the node's pods then use 7Gi of 10Gi, below pressure). The room dips
	// to 0 when regular CPU use rises to the whole node: CPU is
	// compressible, nothing is evicted. Regular memory rising to the whole node is pressure (the
	// batch pods are counted at all the memory they hold): they are evicted,
	// unless no sample reaches the publisher then (steps 1 to 4), since no
	// data is not pressure.
	for _, tc := range []struct {
		name     string
		cpu, mem []int64
		outage   bool
		evicts   bool
	}{
		{"CPU use takes the whole node", []int64{2, 10, 10, 10, 10, 2}, []int64{1, 1, 1, 1, 1, 1}, false, false},
		{"memory use takes the whole node", []int64{2, 2, 2, 2, 2, 2}, []int64{1, 10, 10, 10, 10, 1}, false, true},
		{"memory use takes the whole node, samples stale", []int64{2, 2, 2, 2, 2, 2}, []int64{1, 10, 10, 10, 10, 1}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr := traceOf(t, tc.cpu, tc.mem)
			cfg := exactConfig()
			cfg.Eviction.Mode = eviction.ModeOn
			if tc.outage {
				cfg.Outages = []Outage{{From: tr.Start.Add(5 * time.Minute), To: tr.Start.Add(25 * time.Minute)}}
			}
			s := exactSettings()
			s.Memory.Margin = 0.3
			rep, err := Run(context.Background(), tr, []Contender{{Name: "exact", Settings: &s}}, cfg)
			if err != nil {
				t.Fatal(err)
			}
			c := rep.Results[0].Cluster
			if (c.Evictions > 0) != tc.evicts {
				t.Errorf("%d evictions (stale intervals %d), want evictions=%v", c.Evictions, c.StaleIntervals, tc.evicts)
			}
			if c.StatusBelowHeld != 0 {
				t.Errorf("the status was below what batch pods held on %d node-intervals", c.StatusBelowHeld)
			}
		})
	}
}

func TestSpreadIsTheMedianAndTheWorstNode(t *testing.T) {
	nodes := func(vals ...float64) []NodeResult {
		var out []NodeResult
		for i, v := range vals {
			out = append(out, NodeResult{Name: fmt.Sprintf("n%d", i), Measures: Measures{CPUShortfall: v}})
		}
		return out
	}
	for _, tc := range []struct {
		name     string
		nodes    []NodeResult
		lowWorst bool
		want     NodeSpread
	}{
		{"odd count, the most is worst", nodes(0.3, 0.1, 0.2), false, NodeSpread{Median: 0.2, Worst: 0.3, WorstNode: "n0"}},
		{"even count, the least is worst", nodes(0.4, 0.1, 0.2, 0.3), true, NodeSpread{Median: 0.25, Worst: 0.1, WorstNode: "n1"}},
		{"one node", nodes(0.5), false, NodeSpread{Median: 0.5, Worst: 0.5, WorstNode: "n0"}},
		{"no node", nil, false, NodeSpread{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := spreadOf(tc.nodes, func(m *Measures) float64 { return m.CPUShortfall }, tc.lowWorst)
			if math.Abs(got.Median-tc.want.Median) < 1e-12 {
				got.Median = tc.want.Median
			}
			if got != tc.want {
				t.Errorf("spread %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestRunRequestPolicyGivesNoRoomOnAFullyRequestedNode(t *testing.T) {
	// The same trace beside the request policy, which reads no usage: the
	// pod requests the whole node, so there is no room, no violation and
	// nothing to evict, while the usage policy still sees its three.
	node := reclaimable.Resources{CPUMilli: 10000, MemoryBytes: 10 * gi}
	tr := readTestdata(t, "violation.csv", node)
	s := exactSettings()
	req := exactSettings()
	req.Policy = policy.PolicyRequest
	cfg := DefaultConfig()
	cfg.Period = 5 * time.Minute
	rep, err := Run(context.Background(), tr, []Contender{{Name: "exact", Settings: &s}, {Name: "request", Settings: &req}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c := rep.Results[0].Cluster.CPU; c.Violations != 3 {
		t.Errorf("usage policy: %d CPU violations, want 3", c.Violations)
	}
	if c := rep.Results[1].Cluster; c.CPU.MeanRoom != 0 || c.CPU.Violations != 0 || c.Evictions != 0 {
		t.Errorf("request policy on a node its pod requests in full: %+v, want no room and no violation", c)
	}
}

func TestRequestsMinusPeakBaselineIsRequestsLessThePeakOverItsWindow(t *testing.T) {
	// Requests 10 CPUs; over 5m (this sample and the one before) the usage
	// peaks at 2, 5, 6, 7, 7: room 8, 5, 4, 3, 3 after the first step's 8
	// (every decrease written: decrease threshold 0).
	node := reclaimable.Resources{CPUMilli: 10000, MemoryBytes: 10 * gi}
	tr := readTestdata(t, "violation.csv", node)
	cfg := DefaultConfig()
	cfg.DecreaseThreshold = 0
	rep, err := Run(context.Background(), tr, []Contender{{Name: "rmp", Formula: RequestsMinusPeak{Window: 5 * time.Minute, Step: tr.Step}}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	var rooms []int64
	for _, r := range rep.Results[0].Timeline.Room {
		rooms = append(rooms, r.CPUMilli)
	}
	if want := []int64{8000, 8000, 5000, 4000, 3000, 3000}; !reflect.DeepEqual(rooms, want) {
		t.Errorf("rooms %v, want %v", rooms, want)
	}
	if !rep.Results[0].Baseline {
		t.Error("a formula outside the policy is not marked as a baseline")
	}
}

func TestLongPeakLendsWhatTheHighestUsageOfItsWindowLeaves(t *testing.T) {
	// A spike of 8 CPUs at step 0, then 1 CPU for 159 steps; memory 6Gi at
	// step 1, else 1Gi. CPU over 12h (step 0 stays in the window until step
	// 144, beyond the 64 to 128 samples a baseline keeps otherwise) with a
	// margin of 1 CPU: room 10 - 1 - 8 = 1 CPU through step 144, then
	// 10 - 1 - 1 = 8.
	// Memory over 10m, no margin: 10 - 1, then 10 - 6 while step 1 is in the
	// window (steps 1 to 3), then 9 again.
	const steps = 160
	cpu, mem := make([]int64, steps), make([]int64, steps)
	for k := range cpu {
		cpu[k], mem[k] = 1, 1
	}
	cpu[0], mem[1] = 8, 6
	tr := traceOf(t, cpu, mem)
	cfg := DefaultConfig()
	cfg.DecreaseThreshold = 0
	lp := LongPeak{CPUWindow: 12 * time.Hour, MemoryWindow: 10 * time.Minute, CPUMargin: 0.10, Step: tr.Step}
	rep, err := Run(context.Background(), tr, []Contender{{Name: lp.Name(), Formula: lp}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	rooms := rep.Results[0].Timeline.Room
	if len(rooms) != steps {
		t.Fatalf("%d rooms, want %d", len(rooms), steps)
	}
	for k, r := range rooms {
		wantCPU, wantMem := int64(1000), 9*gi
		if k > 144 {
			wantCPU = 8000
		}
		if k >= 1 && k <= 3 {
			wantMem = 4 * gi
		}
		if r.CPUMilli != wantCPU || r.MemoryBytes != wantMem {
			t.Errorf("step %d: room %dm CPU, %d bytes memory; want %dm, %d", k, r.CPUMilli, r.MemoryBytes, wantCPU, wantMem)
		}
	}
	if got, want := lp.Name(), "peak cpu 12h +0.10, memory 10m +0.00"; got != want {
		t.Errorf("name %q, want %q", got, want)
	}
}

func TestBaseInputKeepsAtLeastItsStepsAndBoundsItsCopy(t *testing.T) {
	// keep 100: after 1,000 pushes of 0..999 the peak of the newest 100 is
	// 999 and their smallest 900; the slice never exceeds twice keep.
	b := baseInput{keep: 100}
	for i := range int64(1000) {
		b.push(reclaimable.Resources{CPUMilli: i, MemoryBytes: 999 - i}, reclaimable.Resources{})
		if len(b.usage) > 200 {
			t.Fatalf("after push %d: %d samples kept, want at most 200", i, len(b.usage))
		}
	}
	if p := b.peak(100); p.CPUMilli != 999 || p.MemoryBytes != 99 {
		t.Errorf("peak of the newest 100: %+v, want CPU 999 and memory 99", p)
	}
	// Without keep, a baseline keeps maxBaseSteps (at most twice that).
	var d baseInput
	for i := range int64(1000) {
		d.push(reclaimable.Resources{MemoryBytes: 999 - i}, reclaimable.Resources{})
	}
	if n := len(d.usage); n < maxBaseSteps || n > 2*maxBaseSteps {
		t.Errorf("%d samples kept without keep, want %d to %d", n, maxBaseSteps, 2*maxBaseSteps)
	}
	if p := d.peak(maxBaseSteps); p.MemoryBytes != 999-1000+maxBaseSteps {
		t.Errorf("peak of the newest %d: %+v, want memory %d", maxBaseSteps, p, 999-1000+maxBaseSteps)
	}
}

func TestRunPlacesNoBatchPodBeforeTheWarmUp(t *testing.T) {
	// The pod uses 2 CPUs and 1Gi throughout: the room is 8 CPUs and 9Gi
	// from the first step on, but with a warm-up of two steps nothing is
	// held before the third (index 2), and from then on all of it.
	tr := traceOf(t, []int64{2, 2, 2, 2, 2}, []int64{1, 1, 1, 1, 1})
	for _, tc := range []struct {
		warmUp time.Duration
		first  int
	}{{0, 0}, {5 * time.Minute, 1}, {10 * time.Minute, 2}} {
		cfg := exactConfig()
		cfg.WarmUp = tc.warmUp
		s := exactSettings()
		rep, err := Run(context.Background(), tr, []Contender{{Name: "exact", Settings: &s}}, cfg)
		if err != nil {
			t.Fatal(err)
		}
		for k, h := range rep.Results[0].Timeline.Held {
			want := reclaimable.Resources{CPUMilli: 8000, MemoryBytes: 9 * gi}
			if k < tc.first {
				want = reclaimable.Resources{}
			}
			if h != want {
				t.Errorf("warm-up %s, step %d: held %+v, want %+v", tc.warmUp, k, h, want)
			}
		}
	}
}
