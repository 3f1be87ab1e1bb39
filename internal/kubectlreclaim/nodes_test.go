package kubectlreclaim

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clienttesting "k8s.io/client-go/testing"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/kube-reclaim/kube-reclaim/policy"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// fourNodes is a cluster with one node of each kind:
//   - node-a: fresh (written 30s ago), 4900m / 17824114278 bytes, usage
//     policy in pool batch, one running reclaimed pod of 1 core / 1Gi (plus a
//     finished one and a regular pod, which do not count), usage 5200m / 20Gi;
//   - node-b: written 25m ago (stale), 4 cores / 8Gi by the request policy,
//     one running reclaimed pod of 500m / 512Mi, which the annotation says it
//     held: the room is zero, the floor what is held, free is negative and
//     the node is over room;
//   - node-c: no annotation;
//   - node-d: fresh, zero on purpose because metrics were stale.
func fourNodes() world {
	a := annotated("node-a", reclaimable.Annotation{CPUMilli: 4900, MemoryBytes: 17824114278, Policy: "usage", Pool: "batch",
		MetricsTime: now.Add(-45 * time.Second), WriteTime: now.Add(-30 * time.Second), Explanation: usageExplanation()},
		reclaimable.Resources{CPUMilli: 4900, MemoryBytes: 17824114278})
	a.Labels["pool"] = "batch"
	b := annotated("node-b", reclaimable.Annotation{CPUMilli: 4000, MemoryBytes: 8 * gib, Policy: "request",
		WriteTime: now.Add(-25 * time.Minute), Explanation: requestExplanation(), Held: &reclaimable.Resources{CPUMilli: 500, MemoryBytes: 512 << 20}},
		reclaimable.Resources{CPUMilli: 4000, MemoryBytes: 8 * gib})
	c := bareNode("node-c")
	d := annotated("node-d", reclaimable.Annotation{Policy: "usage", ZeroReason: policy.ZeroReasonStale,
		MetricsTime: now.Add(-4 * time.Minute), WriteTime: now.Add(-time.Minute), Explanation: staleMetricsExplanation()},
		reclaimable.Resources{})
	return world{
		objects: []runtime.Object{a, b, c, d,
			pod("batch", "train-1", "node-a", "1000", "1Gi", corev1.PodRunning),
			pod("batch", "done", "node-a", "2000", "2Gi", corev1.PodSucceeded),
			pod("default", "web", "node-a", "", "", corev1.PodRunning),
			pod("batch", "train-2", "node-b", "500", "512Mi", corev1.PodRunning),
			pod("batch", "waiting", "", "8000", "8Gi", corev1.PodPending),
		},
		metrics: []metricsv1beta1.NodeMetrics{nodeMetrics("node-a", "5200m", "20Gi", 10*time.Second)},
	}
}

// requestExplanation is what the request policy writes for 16 cores / 64Gi
// with 12 cores / 56Gi requested by regular pods.
func requestExplanation() *reclaimable.Explanation {
	terms := func(alloc, requested int64) []reclaimable.Term {
		return []reclaimable.Term{
			{Name: policy.TermAllocatable, Op: reclaimable.OpBase, Value: alloc},
			{Name: policy.TermRegularRequests, Op: reclaimable.OpSubtract, Value: requested, Note: "requests of 7 regular pods"},
			{Name: policy.TermFloor, Op: reclaimable.OpFloor, Value: 0},
			{Name: policy.TermCap, Op: reclaimable.OpCap, Value: alloc, Note: "100% of allocatable at most"},
			{Name: policy.TermMinimum, Op: reclaimable.OpMinimum, Value: 0},
		}
	}
	return &reclaimable.Explanation{
		CPU:    reclaimable.ResourceExplanation{Result: 4000, Terms: terms(16000, 12000)},
		Memory: reclaimable.ResourceExplanation{Result: 8 * gib, Terms: terms(64*gib, 56*gib)},
	}
}

func staleMetricsExplanation() *reclaimable.Explanation {
	t := []reclaimable.Term{{Name: policy.TermMetricsStale, Op: reclaimable.OpBase, Value: 0, Note: "newest node sample is 4m0s old (stale after 2m0s)"}}
	return &reclaimable.Explanation{CPU: reclaimable.ResourceExplanation{Terms: t}, Memory: reclaimable.ResourceExplanation{Terms: t}}
}

func TestNodesTableShowsRoomHeldFloorFreeUsagePolicyStatusAndAge(t *testing.T) {
	out, errOut, err := run(t, fourNodes(), "nodes")
	if err != nil {
		t.Fatal(err)
	}
	want := "" +
		"NAME     ROOM           HELD         FLOOR          FREE           USAGE        PODS   POLICY               STATUS                               AGE\n" +
		"node-a   4900m/16.6Gi   1/1Gi        4900m/16.6Gi   3900m/15.6Gi   5200m/20Gi   1      usage (pool batch)   Fresh                                30s\n" +
		"node-b   0/0            500m/512Mi   500m/512Mi     -500m/-512Mi   -            1      request              Stale: annotation-too-old,OverRoom   25m\n" +
		"node-c   0/0            0/0          0/0            0/0            -            0      <none>               Stale: annotation-missing            <none>\n" +
		"node-d   0/0            0/0          0/0            0/0            -            0      usage                Zero: metrics-stale                  60s\n"
	if out != want {
		t.Errorf("table:\n%s\nwant:\n%s", out, want)
	}
	if errOut != "" {
		t.Errorf("unexpected stderr %q", errOut)
	}
}

func TestNodesWideAddsAnnotatedStatusValuesAndSampleAges(t *testing.T) {
	w := fourNodes()
	w.objects = w.objects[:2] // node-a and node-b
	out, _, err := run(t, w, "nodes", "-o", "wide")
	if err != nil {
		t.Fatal(err)
	}
	want := "" +
		"NAME     ROOM           HELD   FLOOR          FREE           USAGE        PODS   POLICY               STATUS                      AGE   ANNOTATED      ANNOTATED-HELD   CAPACITY       ALLOCATABLE    METRICS-AGE   USAGE-AGE\n" +
		"node-a   4900m/16.6Gi   0/0    4900m/16.6Gi   4900m/16.6Gi   5200m/20Gi   0      usage (pool batch)   Fresh                       30s   4900m/16.6Gi   <none>           4900m/16.6Gi   4900m/16.6Gi   45s           10s\n" +
		"node-b   0/0            0/0    0/0            0/0            -            0      request              Stale: annotation-too-old   25m   4/8Gi          500m/512Mi       4/8Gi          4/8Gi          <none>        -\n"
	if out != want {
		t.Errorf("wide table:\n%s\nwant:\n%s", out, want)
	}
}

// sortWorld has four fresh nodes whose values order them differently for
// every --sort-by key, and never in name order, so a sort by the wrong key or
// by name alone fails. Per node (largest first in each key):
//
//	         published    requested          pods  usage        written
//	alpha    6 / 5Gi      900m / 25Gi         2    7 / 20Gi     5m ago
//	bravo    2 / 30Gi     1 / 23Gi            4    9 / 30Gi     3m ago
//	charlie  8 / 10Gi     600m / 24Gi         3    5 / 40Gi     1m ago
//	delta    4 / 20Gi     3500m / 1Gi         1    (none)       4m ago
func sortWorld() world {
	var w world
	node := func(name string, cpu, memory int64, written time.Duration) {
		w.objects = append(w.objects, annotated(name, reclaimable.Annotation{CPUMilli: cpu, MemoryBytes: memory, Policy: "usage",
			MetricsTime: now.Add(-written), WriteTime: now.Add(-written)}, res(cpu, memory)))
	}
	// pods puts n pods on the node sharing cpu (millicores, the unit of
	// the reclaimed CPU resource) and memory equally.
	pods := func(node string, n int, cpu, memory int64) {
		for i := range n {
			w.objects = append(w.objects, pod("batch", fmt.Sprintf("%s-%d", node, i), node,
				fmt.Sprint(cpu/int64(n)), fmt.Sprint(memory/int64(n)), corev1.PodRunning))
		}
	}
	node("alpha", 6000, 5*gib, 5*time.Minute)
	pods("alpha", 2, 900, 25*gib)
	node("bravo", 2000, 30*gib, 3*time.Minute)
	pods("bravo", 4, 1000, 23*gib)
	node("charlie", 8000, 10*gib, time.Minute)
	pods("charlie", 3, 600, 24*gib)
	node("delta", 4000, 20*gib, 4*time.Minute)
	pods("delta", 1, 3500, gib)
	w.metrics = []metricsv1beta1.NodeMetrics{
		nodeMetrics("alpha", "7", "20Gi", 5*time.Second),
		nodeMetrics("bravo", "9", "30Gi", 5*time.Second),
		nodeMetrics("charlie", "5", "40Gi", 5*time.Second),
	}
	return w
}

func TestNodesSortByEveryKey(t *testing.T) {
	tests := []struct {
		sortBy string
		want   string
	}{
		{"room-cpu", "charlie alpha delta bravo"},
		{"room-memory", "bravo delta charlie alpha"},
		{"held-cpu", "delta bravo alpha charlie"},
		{"held-memory", "alpha charlie bravo delta"},
		// free = published - requested: charlie 7400m, alpha 5100m, bravo 1, delta 500m.
		{"free-cpu", "charlie alpha bravo delta"},
		// alpha and charlie are over-booked (negative free memory).
		{"free-memory", "delta bravo charlie alpha"},
		{"pods", "bravo charlie alpha delta"},
		// Nodes without usage go last.
		{"usage-cpu", "bravo alpha charlie delta"},
		{"usage-memory", "charlie bravo alpha delta"},
		// Oldest annotation first.
		{"age", "alpha delta bravo charlie"},
		{"name", "alpha bravo charlie delta"},
		{"", "alpha bravo charlie delta"},
	}
	// The fixture is only worth something if every key has an order of its
	// own: check that before trusting a pass.
	seen := map[string]string{}
	for _, tt := range tests {
		if other, dup := seen[tt.want]; dup && tt.sortBy != "" && other != "name" {
			t.Fatalf("fixture: --sort-by %s and %s give the same order %q", tt.sortBy, other, tt.want)
		}
		seen[tt.want] = tt.sortBy
	}
	if keys := nodeSortKeys.names(); len(seen) != len(keys) {
		t.Fatalf("fixture covers %d distinct orders, want one per key %v", len(seen), keys)
	}
	for _, tt := range tests {
		t.Run("sort by "+tt.sortBy, func(t *testing.T) {
			out, _, err := run(t, sortWorld(), "nodes", "--sort-by", tt.sortBy)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(firstColumn(out), " "); got != tt.want {
				t.Errorf("order %s, want %s\n%s", got, tt.want, out)
			}
		})
	}
}

func TestNodesSortTiesByNameAndMissingValuesLast(t *testing.T) {
	w := fourNodes()
	w.metrics = append(w.metrics, nodeMetrics("node-d", "1", "30Gi", 5*time.Second))
	tests := []struct {
		sortBy string
		want   string
	}{
		// node-c and node-d tie at zero; node-b is over-booked.
		{"free-cpu", "node-a node-c node-d node-b"},
		// node-b and node-c have no usage.
		{"usage-memory", "node-d node-a node-b node-c"},
		// node-c has no annotation.
		{"age", "node-b node-d node-a node-c"},
	}
	for _, tt := range tests {
		t.Run("sort by "+tt.sortBy, func(t *testing.T) {
			out, _, err := run(t, w, "nodes", "--sort-by", tt.sortBy)
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(firstColumn(out), " "); got != tt.want {
				t.Errorf("order %s, want %s", got, tt.want)
			}
		})
	}
}

func firstColumn(table string) []string {
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(table), "\n")[1:] {
		names = append(names, strings.Fields(line)[0])
	}
	return names
}

func TestNodesJSONCarriesExactIntegers(t *testing.T) {
	out, _, err := run(t, fourNodes(), "nodes", "-o", "json", "--sort-by", "free-memory")
	if err != nil {
		t.Fatal(err)
	}
	var list NodeList
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if !list.UsageAvailable || list.StaleAfter != "10m0s" || !list.Time.Equal(now) {
		t.Errorf("header: usageAvailable=%v staleAfter=%q time=%s", list.UsageAvailable, list.StaleAfter, list.Time)
	}
	if len(list.Items) != 4 || list.Items[0].Name != "node-a" || list.Items[3].Name != "node-b" {
		t.Fatalf("items not sorted by free memory: %+v", list.Items)
	}
	a, b := list.Items[0], list.Items[3]
	if a.Room != (res(4900, 17824114278)) || a.Held != (res(1000, 1<<30)) || a.Free != (res(3900, 16750372454)) {
		t.Errorf("node-a room %+v held %+v free %+v", a.Room, a.Held, a.Free)
	}
	if a.Floor != a.Room || a.OverRoom {
		t.Errorf("node-a floor %+v over room %v, want the room and not over it", a.Floor, a.OverRoom)
	}
	if b.Floor != (res(500, 512<<20)) || !b.OverRoom || b.Annotation.Held == nil || *b.Annotation.Held != (res(500, 512<<20)) {
		t.Errorf("node-b floor %+v over room %v annotated held %+v, want what is held, over room", b.Floor, b.OverRoom, b.Annotation.Held)
	}
	if a.Usage == nil || *a.Usage != (res(5200, 20<<30)) || a.ReclaimedPods != 1 {
		t.Errorf("node-a usage %+v pods %d", a.Usage, a.ReclaimedPods)
	}
	if a.Annotation == nil || a.Annotation.Policy != "usage" || a.Annotation.Pool != "batch" || !a.Annotation.WriteTime.Equal(now.Add(-30*time.Second)) {
		t.Errorf("node-a annotation %+v", a.Annotation)
	}
	if b.Fresh || b.StaleReason != reclaimable.ReasonWriteTooOld || b.StaleDetail != "annotation written 25m0s ago (stale after 10m0s)" {
		t.Errorf("node-b verdict fresh=%v reason=%q detail=%q", b.Fresh, b.StaleReason, b.StaleDetail)
	}
	if b.Room != (reclaimable.Resources{}) || b.Free != (res(-500, -512<<20)) || b.Annotation.Resources != (res(4000, 8<<30)) || b.Capacity != (res(4000, 8<<30)) {
		t.Errorf("node-b room %+v free %+v annotated %+v capacity %+v", b.Room, b.Free, b.Annotation.Resources, b.Capacity)
	}
	if b.Usage != nil || b.Annotation.MetricsTime != nil {
		t.Errorf("node-b has usage %+v or metrics time %v", b.Usage, b.Annotation.MetricsTime)
	}
	if strings.Contains(out, "explanation") {
		t.Errorf("nodes -o json carries the explanation; that is explain's job:\n%s", out)
	}
}

func TestNodesYAMLForOneNamedNode(t *testing.T) {
	out, _, err := run(t, fourNodes(), "nodes", "node-b", "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"- allocatable:\n    cpuMilli: 4000\n    memoryBytes: 8589934592\n", "  free:\n    cpuMilli: -500\n    memoryBytes: -536870912\n",
		"  staleReason: annotation-too-old\n", "usageAvailable: true\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("yaml lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "node-a") {
		t.Errorf("yaml shows other nodes:\n%s", out)
	}
}

func TestNodesWithoutMetricsAPIShowDashAndWarnButSucceed(t *testing.T) {
	w := fourNodes()
	w.objects = w.objects[:1]
	w.metricsDown = true
	out, errOut, err := run(t, w, "nodes")
	if err != nil {
		t.Fatalf("nodes failed because the metrics API is down: %v", err)
	}
	want := "" +
		"NAME     ROOM           HELD   FLOOR          FREE           USAGE   PODS   POLICY               STATUS   AGE\n" +
		"node-a   4900m/16.6Gi   0/0    4900m/16.6Gi   4900m/16.6Gi   -       0      usage (pool batch)   Fresh    30s\n"
	if out != want {
		t.Errorf("table:\n%s\nwant:\n%s", out, want)
	}
	if wantErr := "Warning: node usage unavailable (metrics.k8s.io: the server is currently unable to handle the request); USAGE shows \"-\".\n"; errOut != wantErr {
		t.Errorf("stderr %q, want %q", errOut, wantErr)
	}

	out, _, err = run(t, w, "nodes", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var list NodeList
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	if list.UsageAvailable || list.UsageError == "" {
		t.Errorf("usageAvailable=%v usageError=%q", list.UsageAvailable, list.UsageError)
	}
}

func TestNodesSelectorFiltersByLabel(t *testing.T) {
	out, _, err := run(t, fourNodes(), "nodes", "-l", "pool=batch")
	if err != nil {
		t.Fatal(err)
	}
	if got := firstColumn(out); strings.Join(got, " ") != "node-a" {
		t.Errorf("nodes %v, want [node-a]", got)
	}
}

func TestNodesStaleAfterDecidesWhatCounts(t *testing.T) {
	out, _, err := run(t, fourNodes(), "nodes", "node-b", "--stale-after", "30m")
	if err != nil {
		t.Fatal(err)
	}
	want := "" +
		"NAME     ROOM    HELD         FLOOR   FREE          USAGE   PODS   POLICY    STATUS   AGE\n" +
		"node-b   4/8Gi   500m/512Mi   4/8Gi   3500m/7.5Gi   -       1      request   Fresh    25m\n"
	if out != want {
		t.Errorf("table:\n%s\nwant:\n%s", out, want)
	}
}

func TestNodesResourceDomainSelectsOtherNames(t *testing.T) {
	other := reclaimable.MustNames("example.com")
	n := bare("node-x").Domain(other).Annotation(reclaimable.Annotation{CPUMilli: 1500, MemoryBytes: 2 * gib, Policy: "request", WriteTime: now.Add(-time.Minute)}).Obj()
	p := pod("batch", "p", "node-x", "", "", corev1.PodRunning)
	p.Spec.Containers[0].Resources.Requests = corev1.ResourceList{other.CPU: mustQuantity("500"), other.Memory: mustQuantity("1Gi")}
	p.Spec.Containers[0].Resources.Limits = p.Spec.Containers[0].Resources.Requests
	w := world{objects: []runtime.Object{n, p}}

	out, _, err := run(t, w, "nodes", "--resource-domain", "example.com")
	if err != nil {
		t.Fatal(err)
	}
	want := "" +
		"NAME     ROOM        HELD       FLOOR       FREE    USAGE   PODS   POLICY    STATUS   AGE\n" +
		"node-x   1500m/2Gi   500m/1Gi   1500m/2Gi   1/1Gi   -       1      request   Fresh    60s\n"
	if out != want {
		t.Errorf("table:\n%s\nwant:\n%s", out, want)
	}
	out, _, err = run(t, w, "nodes")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "Stale: annotation-missing") {
		t.Errorf("the default domain sees the example.com annotation:\n%s", out)
	}
}

func TestNodesInvalidFlagsAreReportedAtOnce(t *testing.T) {
	_, _, err := run(t, fourNodes(), "nodes", "-o", "xml", "--sort-by", "color", "--stale-after", "0s", "-l", "a in (", "--resource-domain", "Not_A_Domain", "--publisher-lease-name", "Bad_Lease")
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{`--output: "xml" is not one of wide, json, yaml, name, go-template`, `--sort-by: "color" is not one of name, age, free-cpu`,
		"--stale-after must be positive, got 0s", "--selector:", `--resource-domain: resource domain "Not_A_Domain"`, `--publisher-lease-name "Bad_Lease"`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error lacks %q:\n%v", want, err)
		}
	}
}

func TestNodesUnknownNodeFails(t *testing.T) {
	_, _, err := run(t, fourNodes(), "nodes", "node-z")
	if err == nil || !strings.Contains(err.Error(), `"node-z" not found`) {
		t.Errorf("error %v, want node-z not found", err)
	}
}

func TestNodesOutputNameNoHeadersAndJSONPath(t *testing.T) {
	tests := []struct {
		args []string
		want string
	}{
		{[]string{"--sort-by", "free-cpu", "-o", "name"}, "node/charlie\nnode/alpha\nnode/bravo\nnode/delta\n"},
		{[]string{"-l", "kubernetes.io/hostname=bravo", "--no-headers"},
			"bravo   2/30Gi   1/23Gi   2/30Gi   1/7Gi   9/30Gi   4     usage   Fresh   3m\n"},
		{[]string{"--sort-by", "pods", "-o", "jsonpath={.items[*].name}"}, "bravo charlie alpha delta"},
		{[]string{"charlie", "--template", "{{.kind}} {{(index .items 0).held.cpuMilli}}"}, "NodeList 600"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			out, errOut, err := run(t, sortWorld(), append([]string{"nodes"}, tt.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			if out != tt.want || errOut != "" {
				t.Errorf("stdout:\n%s\nwant:\n%s\nstderr: %q", out, tt.want, errOut)
			}
		})
	}
}

func TestNodesJSONIsATypedList(t *testing.T) {
	out, _, err := run(t, sortWorld(), "nodes", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var list NodeList
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	if list.APIVersion != "kubectl.kube-reclaim.io/v1alpha1" || list.Kind != "NodeList" || len(list.Items) != 4 {
		t.Errorf("apiVersion %q kind %q, %d items", list.APIVersion, list.Kind, len(list.Items))
	}
}

func TestNodesRequestedSumsFollowEveryPodPage(t *testing.T) {
	want := map[string]reclaimable.Resources{
		"alpha": res(900, 25*gib), "bravo": res(1000, 23*gib), "charlie": res(600, 24*gib), "delta": res(3500, gib),
	}
	for _, chunk := range []string{"1", "3", "0"} {
		t.Run("chunk size "+chunk, func(t *testing.T) {
			w := sortWorld()
			var limits []int64
			w.reactors = map[string]clienttesting.ReactionFunc{"pods": pagedPods(w, &limits)}
			out, _, err := run(t, w, "nodes", "-o", "json", "--chunk-size", chunk)
			if err != nil {
				t.Fatal(err)
			}
			var list NodeList
			if err := json.Unmarshal([]byte(out), &list); err != nil {
				t.Fatal(err)
			}
			for _, r := range list.Items {
				if r.Held != want[r.Name] {
					t.Errorf("%s held %+v, want %+v", r.Name, r.Held, want[r.Name])
				}
			}
			// 10 pods: 10 pages of one, 4 of three, or one list.
			if wantPages := map[string]int{"1": 10, "3": 4, "0": 1}[chunk]; len(limits) != wantPages {
				t.Errorf("%d pod list requests, want %d", len(limits), wantPages)
			}
		})
	}
}

func TestNodesBadTemplateFailsBeforeReading(t *testing.T) {
	w := sortWorld()
	listed := false
	w.reactors = map[string]clienttesting.ReactionFunc{"nodes": func(clienttesting.Action) (bool, runtime.Object, error) {
		listed = true
		return false, nil, nil
	}}
	_, _, err := run(t, w, "nodes", "-o", "jsonpath={.items[")
	if err == nil || !strings.Contains(err.Error(), "--output:") {
		t.Errorf("error %v, want an --output error", err)
	}
	if listed {
		t.Error("nodes were listed although the template is invalid")
	}
	// Positive control: a valid template lists them.
	if _, _, err := run(t, w, "nodes", "-o", "jsonpath={.items[0].name}"); err != nil || !listed {
		t.Errorf("valid template: err %v, listed %v", err, listed)
	}
}
