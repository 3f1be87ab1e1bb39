package replay

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"math"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

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

func TestRunMeasuresAViolationLastingThreeSteps(t *testing.T) {
	// One node of 10 CPUs/10Gi, one pod using 2, 2, 5, 6, 7, 2 CPUs and 1Gi.
	// The room written at each step is 10 - usage: 8, 8, 5, 4, 3, 8 CPUs, 9Gi.
	// Intervals 1..5 (room of the step before + usage):
	//   8+2=10 ok; 8+5=13 over by 3; 5+6=11 over by 1; 4+7=11 over by 1; 3+2=5 ok.
	// CPU: 3 violations of 5, excess 30%, 10%, 10% (mean 1/6, max 30%), one
	// episode of 3 steps (15m); room 8+8+5+4+3=28 over unused 8+5+4+3+8=28.
	// Memory: room 9Gi x 5 over unused 9Gi x 5, no violation.
	// Batch pods fill the room: b1 8 CPUs at step 0; from step 2 it holds
	// more than the room, which stops placement and evicts nothing (a dip
	// of the room is not pressure, and memory stays at 1Gi of 10Gi).
	// Writes: initial, held-changed (b1), decreased x3, changed: 6.
	node := reclaimable.Resources{CPUMilli: 10000, MemoryBytes: 10 * gi}
	tr := readTestdata(t, "violation.csv", node)
	s := exactSettings()
	cfg := DefaultConfig()
	cfg.DecreaseThreshold = 0
	cfg.Period = 5 * time.Minute
	rep, err := Run(context.Background(), tr, []Contender{{Name: "exact", Settings: &s}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	got := rep.Results[0].Cluster
	want := Measures{NodeIntervals: 5, Writes: 6, Evictions: 0,
		CPU: ResourceMeasures{MeanRoom: 5600, ReclaimedShare: 1, Violations: 3, ViolationRate: 0.6,
			MeanExcess: 0.5 / 3, MaxExcess: 0.3, Episodes: 1, MeanEpisode: "15m0s", LongestEpisode: "15m0s", meanSteps: 3, maxSteps: 3},
		Memory: ResourceMeasures{MeanRoom: float64(9 * gi), ReclaimedShare: 1, MeanEpisode: "0s", LongestEpisode: "0s"}}
	if math.Abs(got.CPU.MeanExcess-want.CPU.MeanExcess) < 1e-12 {
		got.CPU.MeanExcess = want.CPU.MeanExcess
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("measures\n got %+v\nwant %+v", got, want)
	}
	if n := rep.Results[0].Nodes; len(n) != 1 || !reflect.DeepEqual(n[0].Measures, got) {
		t.Errorf("the one node's measures %+v differ from the cluster's", n)
	}
	tl := rep.Results[0].Timeline
	var rooms []int64
	for _, r := range tl.Room {
		rooms = append(rooms, r.CPUMilli)
	}
	if want := []int64{8000, 8000, 5000, 4000, 3000, 8000}; !reflect.DeepEqual(rooms, want) || !reflect.DeepEqual(tl.Evictions, []int{0, 0, 0, 0, 0, 0}) {
		t.Errorf("timeline rooms %v evictions %v, want %v and no eviction", rooms, tl.Evictions, want)
	}
	if _, err := json.Marshal(rep); err != nil {
		t.Errorf("the report does not encode: %v", err)
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
