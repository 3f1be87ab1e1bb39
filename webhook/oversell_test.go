package webhook

import (
	"encoding/json"
	"math/big"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"k8s.io/apimachinery/pkg/api/resource"
)

const (
	cpuRatioKey = "node-restriction.kubernetes.io/kube-reclaim.io-oversell-cpu-ratio"
	memRatioKey = "node-restriction.kubernetes.io/kube-reclaim.io-oversell-memory-ratio"
	recordKey   = "kube-reclaim.io/oversell-raw"
)

// apiserver stands in for the stored node and the apiserver's handling of a
// nodes/status write: the writer's change is applied to the stored object,
// the webhook is called with object (after the change) and oldObject (the
// stored node), its patch is applied, and the result is stored.
type apiserver struct {
	t      *testing.T
	th     testHandler
	stored []byte
}

func newAPIServer(t *testing.T, n node) *apiserver {
	return &apiserver{t: t, th: newTestHandler(t, testNames, nil), stored: n.json(t)}
}

func (s *apiserver) current() node {
	var n node
	if err := json.Unmarshal(s.stored, &n); err != nil {
		s.t.Fatal(err)
	}
	return n
}

// statusWrite is a write through nodes/status, so through the webhook.
func (s *apiserver) statusWrite(change func(n node)) answer {
	s.t.Helper()
	n := s.current()
	change(n)
	obj := n.json(s.t)
	a := post(s.t, s.th, reviewSpec{object: obj, oldObject: s.stored}.json(s.t))
	if a.code != http.StatusOK || !a.allowed {
		s.t.Fatalf("status write answered %+v", a)
	}
	s.stored = apply(s.t, obj, a.patch)
	return a
}

// nodeWrite is a write of the node itself (labels, annotations): the webhook
// is not called for it.
func (s *apiserver) nodeWrite(change func(n node)) {
	n := s.current()
	change(n)
	s.stored = n.json(s.t)
}

// heartbeat is kwok's conditions-only status patch.
func heartbeat(n node) {
	n.status()["conditions"] = []any{map[string]any{"type": "Ready", "status": "True", "lastHeartbeatTime": time.Now().UTC().Format(time.RFC3339Nano)}}
}

// kubelet posts its own computed (raw) allocatable.
func kubelet(cpu, memory string) func(node) {
	return func(n node) {
		heartbeat(n)
		n.setStatus("allocatable", "cpu", cpu).setStatus("allocatable", "memory", memory)
	}
}

// publisher patches the extended resources.
func publisher(n node) {
	n.setStatus("capacity", cpuKey, "100").setStatus("allocatable", cpuKey, "100")
}

func (s *apiserver) expectAllocatable(cpu, memory string) {
	s.t.Helper()
	got := decodeNode(s.t, s.stored).Status.Allocatable
	for _, c := range [][3]string{{"cpu", got["cpu"], cpu}, {"memory", got["memory"], memory}} {
		if !sameQuantity(c[1], c[2]) {
			s.t.Errorf("allocatable %s = %q, want %s", c[0], c[1], c[2])
		}
	}
}

func (s *apiserver) record() (OversellRecord, bool) {
	s.t.Helper()
	v, ok := decodeNode(s.t, s.stored).Metadata.Annotations[recordKey]
	if !ok {
		return OversellRecord{}, false
	}
	r, err := ParseOversellRecord(v)
	if err != nil {
		s.t.Fatalf("record %q: %v", v, err)
	}
	return r, true
}

func sameQuantity(a, b string) bool {
	qa, err1 := resource.ParseQuantity(a)
	qb, err2 := resource.ParseQuantity(b)
	return err1 == nil && err2 == nil && qa.Cmp(qb) == 0
}

// The test node: capacity cpu 4, memory 16Gi; raw allocatable 3800m, 15Gi.

func TestOversellMultipliesRawAllocatable(t *testing.T) {
	s := newAPIServer(t, newNode("n1").setLabel(cpuRatioKey, "1.5"))
	a := s.statusWrite(heartbeat)
	s.expectAllocatable("5700m", "15Gi")
	rec, ok := s.record()
	if !ok || rec.CPU == nil || rec.Memory != nil {
		t.Fatalf("record = %+v, %v; want a cpu entry only", rec, ok)
	}
	if rec.CPU.Ratio != "1.5" || rec.CPU.Raw.String() != "3800m" || rec.CPU.Applied.String() != "5700m" || rec.CPU.Capacity.String() != "4" {
		t.Errorf("cpu record = %+v", *rec.CPU)
	}
	for _, kind := range []string{PatchOversell, PatchOversellRecord} {
		if got := testutil.ToFloat64(s.th.metrics.patches.WithLabelValues(kind)); got != 1 {
			t.Errorf("patches{kind=%s} = %v, want 1 (patch %s)", kind, got, a.patch)
		}
	}
}

func TestOversellMemoryByLabel(t *testing.T) {
	s := newAPIServer(t, newNode("n1").setLabel(memRatioKey, "1.25"))
	s.statusWrite(heartbeat)
	// 15Gi × 1.25 = 18.75Gi = 19200Mi
	s.expectAllocatable("3800m", "19200Mi")
}

func TestOversellIsCappedAtCapacityTimesRatio(t *testing.T) {
	// An allocatable above capacity (set by hand) would give 4500m × 1.5 = 6750m;
	// the cap is capacity 4 × 1.5 = 6.
	s := newAPIServer(t, newNode("n1").setLabel(cpuRatioKey, "1.5").setStatus("allocatable", "cpu", "4500m"))
	s.statusWrite(heartbeat)
	s.expectAllocatable("6", "15Gi")
}

func TestOversellDoesNotCompound(t *testing.T) {
	for _, c := range []struct {
		name   string
		writer func(i int) func(node)
	}{
		{"conditions-only heartbeats", func(int) func(node) { return heartbeat }},
		{"kubelet sending raw values", func(int) func(node) { return kubelet("3800m", "15Gi") }},
		{"publisher extended-resource patches", func(int) func(node) { return publisher }},
		{"all writers interleaved", func(i int) func(node) {
			return []func(node){heartbeat, kubelet("3800m", "15Gi"), publisher}[i%3]
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newAPIServer(t, newNode("n1").setLabel(cpuRatioKey, "1.5").setLabel(memRatioKey, "2"))
			for i := 0; i < 10; i++ {
				s.statusWrite(c.writer(i))
				s.expectAllocatable("5700m", "30Gi")
				if t.Failed() {
					t.Fatalf("after write %d", i+1)
				}
			}
			rec, _ := s.record()
			if rec.CPU == nil || rec.CPU.Raw.String() != "3800m" || rec.Memory == nil || rec.Memory.Raw.String() != "15Gi" {
				t.Errorf("record after 10 writes = %+v", rec)
			}
		})
	}
}

func TestOversellReinvocationChangesNothing(t *testing.T) {
	th := newTestHandler(t, testNames, nil)
	obj := newNode("n1").setLabel(cpuRatioKey, "1.5").setAnnotation(annKey, annotationValue(10, 10, testNow.Add(-time.Minute))).json(t)
	first := post(t, th, reviewSpec{object: obj}.json(t))
	patched := apply(t, obj, first.patch)
	// reinvocationPolicy IfNeeded: called again with its own patch applied.
	again := post(t, th, reviewSpec{object: patched}.json(t))
	if again.patch != nil {
		t.Fatalf("second invocation patched again: %s", again.patch)
	}
}

func TestOversellPicksUpKubeletRawChange(t *testing.T) {
	s := newAPIServer(t, newNode("n1").setLabel(cpuRatioKey, "1.5"))
	s.statusWrite(heartbeat)
	s.expectAllocatable("5700m", "15Gi")
	s.statusWrite(kubelet("3500m", "15Gi")) // kubelet reserved more
	s.expectAllocatable("5250m", "15Gi")
	s.statusWrite(heartbeat)
	s.expectAllocatable("5250m", "15Gi")
	if rec, _ := s.record(); rec.CPU == nil || rec.CPU.Raw.String() != "3500m" {
		t.Errorf("record = %+v, want raw 3500m", rec)
	}
}

func TestOversellCapacityChangeIsAFreshRawValue(t *testing.T) {
	s := newAPIServer(t, newNode("n1").setLabel(cpuRatioKey, "1.5"))
	s.statusWrite(heartbeat)
	// The node grows to 8 CPUs and kubelet's new raw value happens to be
	// the old applied one: the capacity change tells them apart.
	s.statusWrite(func(n node) {
		heartbeat(n)
		n.setStatus("capacity", "cpu", "8").setStatus("allocatable", "cpu", "5700m")
	})
	s.expectAllocatable("8550m", "15Gi")
}

func TestRemovingTheRatioRestoresRaw(t *testing.T) {
	for _, c := range []struct {
		name   string
		writer func(node)
	}{
		{"on a conditions-only heartbeat", heartbeat},
		{"on a kubelet write", kubelet("3800m", "15Gi")},
		{"on a publisher patch", publisher},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newAPIServer(t, newNode("n1").setLabel(cpuRatioKey, "1.5").setLabel(memRatioKey, "2"))
			s.statusWrite(heartbeat)
			s.expectAllocatable("5700m", "30Gi")
			s.nodeWrite(func(n node) {
				delete(n.meta()["labels"].(map[string]any), cpuRatioKey)
				delete(n.meta()["labels"].(map[string]any), memRatioKey)
			})
			s.statusWrite(c.writer)
			s.expectAllocatable("3800m", "15Gi")
			if rec, ok := s.record(); ok {
				t.Errorf("record still present: %+v", rec)
			}
			s.statusWrite(heartbeat)
			s.expectAllocatable("3800m", "15Gi")
		})
	}
}

func TestRemovingOneRatioKeepsTheOther(t *testing.T) {
	s := newAPIServer(t, newNode("n1").setLabel(cpuRatioKey, "1.5").setLabel(memRatioKey, "2"))
	s.statusWrite(heartbeat)
	s.nodeWrite(func(n node) { delete(n.meta()["labels"].(map[string]any), cpuRatioKey) })
	s.statusWrite(heartbeat)
	s.expectAllocatable("3800m", "30Gi")
	if rec, _ := s.record(); rec.CPU != nil || rec.Memory == nil {
		t.Errorf("record = %+v, want the memory entry only", rec)
	}
	if got := testutil.ToFloat64(s.th.metrics.patches.WithLabelValues(PatchOversellRestore)); got != 1 {
		t.Errorf("patches{kind=oversell-restore} = %v, want 1", got)
	}
}

func TestChangingTheRatioStartsFromRaw(t *testing.T) {
	s := newAPIServer(t, newNode("n1").setLabel(cpuRatioKey, "1.5"))
	s.statusWrite(heartbeat)
	s.nodeWrite(func(n node) { n.setLabel(cpuRatioKey, "2") })
	s.statusWrite(heartbeat)
	s.expectAllocatable("7600m", "15Gi")
}

// A kubelet may set any annotation and any label outside
// node-restriction.kubernetes.io/ on its own Node: none of those opts a node
// in, whatever its value. The label an administrator sets does (control).
func TestOnlyTheNodeRestrictionLabelOptsANodeIn(t *testing.T) {
	for _, c := range []struct {
		name    string
		node    node
		wantCPU string
	}{
		{"the node-restriction label", newNode("n1").setLabel(cpuRatioKey, "1.5"), "5700m"},
		{"the same key as an annotation", newNode("n1").setAnnotation(cpuRatioKey, "1.5"), "3800m"},
		{"the former domain label", newNode("n1").setLabel("kube-reclaim.io/oversell-cpu-ratio", "1.5"), "3800m"},
		{"the former domain annotation", newNode("n1").setAnnotation("kube-reclaim.io/oversell-cpu-ratio", "1.5"), "3800m"},
		{"an annotation beside a valid label does not override it",
			newNode("n1").setLabel(cpuRatioKey, "1.5").setAnnotation(cpuRatioKey, "10"), "5700m"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newAPIServer(t, c.node)
			s.statusWrite(heartbeat)
			s.expectAllocatable(c.wantCPU, "15Gi")
		})
	}
}

// --oversell=false: no label opts a node in, and a node inflated before gets
// its raw allocatable back on its next status write.
func TestOversellOffIgnoresRatiosAndRestoresRaw(t *testing.T) {
	s := newAPIServer(t, newNode("n1").setLabel(cpuRatioKey, "1.5").setLabel(memRatioKey, "2"))
	s.statusWrite(heartbeat)
	s.expectAllocatable("5700m", "30Gi") // control: on, it inflates
	s.th.SetOversell(false)
	s.statusWrite(heartbeat)
	s.expectAllocatable("3800m", "15Gi")
	if rec, ok := s.record(); ok {
		t.Errorf("record still present: %+v", rec)
	}
	fresh := newAPIServer(t, newNode("n2").setLabel(cpuRatioKey, "abc"))
	fresh.th.SetOversell(false)
	fresh.statusWrite(heartbeat)
	fresh.expectAllocatable("3800m", "15Gi")
	if got := testutil.ToFloat64(fresh.th.metrics.errors.WithLabelValues(ErrInvalidOversellRatio)); got != 0 {
		t.Errorf("a ratio was judged with oversell off: errors{kind=invalid-oversell-ratio} = %v", got)
	}
}

func TestInvalidRatioIsIgnored(t *testing.T) {
	for _, v := range []string{"abc", "1", "0.5", "10.5", "11", "-2", "1.5x", "1.", ".5", "1e1", "3/2", ""} {
		t.Run(v, func(t *testing.T) {
			s := newAPIServer(t, newNode("n1").setLabel(cpuRatioKey, v).setAnnotation(annKey, annotationValue(1, 1, testNow.Add(-time.Minute))))
			s.statusWrite(heartbeat)
			s.expectAllocatable("3800m", "15Gi")
			if _, ok := s.record(); ok {
				t.Error("a record was written for an invalid ratio")
			}
			want := 1.0
			if v == "" {
				want = 0 // an empty value is no ratio at all
			}
			if got := testutil.ToFloat64(s.th.metrics.errors.WithLabelValues(ErrInvalidOversellRatio)); got != want {
				t.Errorf("errors{kind=invalid-oversell-ratio} = %v, want %v", got, want)
			}
		})
	}
}

func TestDeletedRecordIsBoundedByTheCap(t *testing.T) {
	// Documented limit: without the record the stored inflated value is
	// taken as raw once, and the cap bounds the damage until kubelet posts
	// its raw value again.
	s := newAPIServer(t, newNode("n1").setLabel(cpuRatioKey, "1.5"))
	s.statusWrite(heartbeat)
	s.nodeWrite(func(n node) { delete(n.meta()["annotations"].(map[string]any), recordKey) })
	s.statusWrite(heartbeat)
	s.expectAllocatable("6", "15Gi")
	s.statusWrite(kubelet("3800m", "15Gi"))
	s.expectAllocatable("5700m", "15Gi")
}

func TestOversellOnCreate(t *testing.T) {
	th := newTestHandler(t, testNames, nil)
	n := newNode("n1").setLabel(cpuRatioKey, "1.5")
	delete(n.meta(), "annotations")
	obj := n.json(t)
	a := post(t, th, reviewSpec{operation: "CREATE", subResource: "-", object: obj}.json(t))
	got := decodeNode(t, apply(t, obj, a.patch))
	if !sameQuantity(got.Status.Allocatable["cpu"], "5700m") {
		t.Errorf("allocatable cpu = %q, want 5700m", got.Status.Allocatable["cpu"])
	}
	if _, ok := got.Metadata.Annotations[recordKey]; !ok {
		t.Errorf("no record annotation: %v", got.Metadata.Annotations)
	}
}

func TestParseRatio(t *testing.T) {
	for in, want := range map[string]string{"1.5": "3/2", "2": "2/1", "10": "10/1", "1.001": "1001/1000", "01.5": "3/2"} {
		r, err := parseRatio(in)
		if err != nil || r.RatString() != new(big.Rat).SetFrac64(ratNum(want)).RatString() {
			t.Errorf("parseRatio(%q) = %v, %v; want %s", in, r, err, want)
		}
	}
}

func ratNum(s string) (int64, int64) {
	r, _ := new(big.Rat).SetString(s)
	return r.Num().Int64(), r.Denom().Int64()
}
