package kubectlreclaim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"

	"github.com/kube-reclaim/kube-reclaim/internal/policyfile"
	"github.com/kube-reclaim/kube-reclaim/internal/testobj"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// simWorld is the cluster of a simulate test: 10-core / 10Gi nodes, their
// pods, and metrics.k8s.io, whose readings are timestamped from the clock.
type simWorld struct {
	objects []runtime.Object
	// usage is each node's usage (cpu, memory) and podUsage each pod's
	// ("ns/name"); every reading is stamped 5 s before now plus 15 s per
	// reading already served, as metrics-server's scrapes would be.
	usage    map[string][2]string
	podUsage map[string][2]string
	// metricsDown makes metrics.k8s.io fail from the given reading on
	// (1-based); 0 never.
	metricsDownFrom int
}

type simResult struct {
	out, errOut string
	err         error
	// writes are the non-read requests the fake API server received.
	writes []string
	reads  int
}

func simNode(name string, labels map[string]string) *corev1.Node {
	n := testobj.MakeNode().Name(name).NoAnnotations().Capacity("10", "10Gi")
	for k, v := range labels {
		n.Label(k, v)
	}
	return n.Obj()
}

// regularPod is a running pod on node requesting native cpu/memory.
func regularPod(name, node, cpu, memory string) *corev1.Pod {
	return testobj.MakePod().Namespace("default").Name(name).Node(node).Req(cpu, memory).
		Phase(corev1.PodRunning).StartedAt(now.Add(-time.Hour)).Obj()
}

func simulate(t *testing.T, w simWorld, args ...string) simResult {
	t.Helper()
	var out, errOut bytes.Buffer
	var readings atomic.Int32
	o := NewOptions(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut})
	o.Now = func() time.Time { return now.Add(time.Duration(readings.Load()) * 15 * time.Second) }
	var kube *fake.Clientset
	var mc *metricsfake.Clientset
	o.NewClients = func() (Clients, error) {
		mc = metricsfake.NewSimpleClientset()
		down := func() bool { return w.metricsDownFrom > 0 && int(readings.Load())+1 >= w.metricsDownFrom }
		mc.PrependReactor("list", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
			if down() {
				return true, nil, errors.New("the server is currently unable to handle the request (get nodes.metrics.k8s.io)")
			}
			at := metav1.NewTime(now.Add(time.Duration(readings.Load())*15*time.Second - 5*time.Second))
			l := &metricsv1beta1.NodeMetricsList{}
			for name, u := range w.usage {
				l.Items = append(l.Items, metricsv1beta1.NodeMetrics{ObjectMeta: metav1.ObjectMeta{Name: name}, Timestamp: at,
					Usage: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(u[0]), corev1.ResourceMemory: resource.MustParse(u[1])}})
			}
			return true, l, nil
		})
		mc.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
			if down() {
				return true, nil, errors.New("the server is currently unable to handle the request (get pods.metrics.k8s.io)")
			}
			at := metav1.NewTime(now.Add(time.Duration(readings.Load())*15*time.Second - 5*time.Second))
			readings.Add(1)
			l := &metricsv1beta1.PodMetricsList{}
			for key, u := range w.podUsage {
				ns, name, _ := cache.SplitMetaNamespaceKey(key)
				l.Items = append(l.Items, metricsv1beta1.PodMetrics{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Timestamp: at,
					Containers: []metricsv1beta1.ContainerMetrics{{Name: "c",
						Usage: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(u[0]), corev1.ResourceMemory: resource.MustParse(u[1])}}}})
			}
			return true, l, nil
		})
		kube = fake.NewClientset(w.objects...)
		return Clients{Kube: kube, Metrics: mc}, nil
	}
	defer func(s func(context.Context, time.Duration) error) { sleep = s }(sleep)
	sleep = func(context.Context, time.Duration) error { return nil }
	cmd := NewCommand(o)
	cmd.SetArgs(append([]string{"simulate"}, args...))
	r := simResult{err: cmd.ExecuteContext(context.Background())}
	r.out, r.errOut = out.String(), errOut.String()
	if kube != nil {
		for _, a := range append(kube.Actions(), mc.Actions()...) {
			switch a.GetVerb() {
			case "get", "list", "watch":
				r.reads++
			default:
				r.writes = append(r.writes, a.GetVerb()+" "+a.GetResource().Resource)
			}
		}
	}
	return r
}

func simulateJSON(t *testing.T, w simWorld, args ...string) *SimulationReport {
	t.Helper()
	r := simulate(t, w, append(args, "-o", "json")...)
	if r.err != nil {
		t.Fatalf("simulate: %v\n%s", r.err, r.errOut)
	}
	if len(r.writes) > 0 {
		t.Errorf("simulate wrote to the cluster: %v", r.writes)
	}
	var rep SimulationReport
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
		t.Fatalf("%v\n%s", err, r.out)
	}
	return &rep
}

func writePolicy(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "policy.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func item(t *testing.T, r *SimulationReport, name string) *SimulatedNode {
	t.Helper()
	for i := range r.Items {
		if r.Items[i].Name == name {
			return &r.Items[i]
		}
	}
	t.Fatalf("no node %s in %+v", name, r.Items)
	return nil
}

// The default usage policy on a 10-core / 10Gi node keeps 35% and subtracts
// the regular usage: 6500m - usage and 6.5Gi - usage.
const defaultCPUBase, defaultMemBase = int64(6500), int64(10<<30) * 65 / 100

func TestSimulateComputesTheDefaultPolicyFromNodesPodsAndMetrics(t *testing.T) {
	batch := pod("default", "batch", "busy", "1500", "1Gi", corev1.PodRunning)
	batch.Status.StartTime = &metav1.Time{Time: now.Add(-time.Hour)}
	w := simWorld{
		objects: []runtime.Object{simNode("idle", nil), simNode("busy", nil), batch, regularPod("web", "busy", "1", "1Gi")},
		usage:   map[string][2]string{"idle": {"2", "1Gi"}, "busy": {"5", "3Gi"}},
		// The reclaimed pod's own usage is not regular work.
		podUsage: map[string][2]string{"default/batch": {"1500m", "1Gi"}, "default/web": {"2", "1Gi"}},
	}
	r := simulateJSON(t, w)

	idle, busy := item(t, r, "idle"), item(t, r, "busy")
	if want := res(defaultCPUBase-2000, defaultMemBase-1<<30); idle.Reclaimable != want {
		t.Errorf("idle: reclaimable %+v, want %+v", idle.Reclaimable, want)
	}
	if want := res(defaultCPUBase-3500, defaultMemBase-2<<30); busy.Reclaimable != want {
		t.Errorf("busy: reclaimable %+v, want %+v (node usage minus the reclaimed pod's)", busy.Reclaimable, want)
	}
	if busy.RegularUsage == nil || *busy.RegularUsage != res(3500, 2<<30) {
		t.Errorf("busy: regular usage %+v, want 3500m/2Gi", busy.RegularUsage)
	}
	if busy.Held != res(1500, 1<<30) || busy.Allocatable != res(10000, 10<<30) || busy.Policy != "usage" {
		t.Errorf("busy: held %+v allocatable %+v policy %q", busy.Held, busy.Allocatable, busy.Policy)
	}
	if r.Installed || idle.Published != nil || idle.Difference != nil {
		t.Errorf("nothing is published, yet installed=%v published=%+v", r.Installed, idle.Published)
	}
	if r.Samples != 1 || !strings.Contains(r.Note, "one usage sample") || r.Policy != "built-in default" {
		t.Errorf("samples %d, note %q, policy %q", r.Samples, r.Note, r.Policy)
	}
	s := r.Summary
	wantTotal := idle.Reclaimable.Add(busy.Reclaimable)
	if s.Nodes != 2 || s.Reclaimable != wantTotal || s.Allocatable != res(20000, 20<<30) {
		t.Errorf("summary %+v, want total %+v", s, wantTotal)
	}
	if want := 100 * float64(wantTotal.CPUMilli) / 20000; s.CPUPercent != want || s.CPUNodesWorth != 2*want/100 {
		t.Errorf("cpu share %.2f%% / %.2f nodes, want %.2f%%", s.CPUPercent, s.CPUNodesWorth, want)
	}
	// cpu=2,memory=4Gi: idle holds min(4500/2000, 5.5Gi/4Gi) = 1, busy
	// min(3000/2000, 4.5Gi/4Gi) = 1.
	if idle.PodsFit != 1 || busy.PodsFit != 1 || s.PodsFit != 2 {
		t.Errorf("pods fit idle %d busy %d total %d, want 1, 1, 2", idle.PodsFit, busy.PodsFit, s.PodsFit)
	}
}

func TestSimulateComparesPublishedValuesAndASecondPolicy(t *testing.T) {
	published := testobj.MakeNode().Name("n1").Label("pool", "batch").Capacity("10", "10Gi").
		Room(4000, 4<<30).WrittenAt(now.Add(-time.Minute)).Obj()
	w := simWorld{objects: []runtime.Object{published, simNode("n2", nil)},
		usage: map[string][2]string{"n1": {"2", "1Gi"}, "n2": {"1", "1Gi"}}}
	larger := writePolicy(t, "default:\n  cpu:\n    margin: 0.5\n  memory:\n    margin: 0.5\n")
	pools := writePolicy(t, "pools:\n  - name: batch\n    nodeSelector:\n      pool: batch\n    policy: request\n")

	r := simulateJSON(t, w, "-f", pools, "--compare", larger)

	n1, n2 := item(t, r, "n1"), item(t, r, "n2")
	if !r.Installed || n1.Published == nil || *n1.Published != res(4000, 4<<30) || n2.Published != nil {
		t.Fatalf("published: installed %v n1 %+v n2 %+v", r.Installed, n1.Published, n2.Published)
	}
	// n1 is in the request pool: allocatable minus no requests.
	if n1.Pool != "batch" || n1.Policy != "request" || n1.Reclaimable != res(10000, 10<<30) {
		t.Errorf("n1: %s/%s %+v", n1.Pool, n1.Policy, n1.Reclaimable)
	}
	if *n1.Difference != res(6000, 6<<30) {
		t.Errorf("n1 difference %+v, want reclaimable - published", *n1.Difference)
	}
	// The larger margin: 5000m - usage, 5Gi - usage, on every node.
	for _, n := range []*SimulatedNode{n1, n2} {
		if n.Compare == nil || n.Compare.Policy != "usage" {
			t.Fatalf("%s: compare %+v", n.Name, n.Compare)
		}
		if n.Compare.Reclaimable.CPUMilli >= n.Reclaimable.CPUMilli || n.Compare.Change.CPUMilli >= 0 {
			t.Errorf("%s: the larger margin does not lower cpu: %+v -> %+v", n.Name, n.Reclaimable, n.Compare.Reclaimable)
		}
	}
	if n2.Compare.Reclaimable != res(4000, 4<<30) || *n2.Compare.Change != res(-1500, -(defaultMemBase-1<<30-4<<30)) {
		t.Errorf("n2 compare %+v change %+v", n2.Compare.Reclaimable, *n2.Compare.Change)
	}
	if r.CompareSummary == nil || r.CompareSummary.Reclaimable != n1.Compare.Reclaimable.Add(n2.Compare.Reclaimable) {
		t.Errorf("compare summary %+v", r.CompareSummary)
	}

	table := simulate(t, w, "-f", pools, "--compare", larger)
	for _, want := range []string{"PUBLISHED", "DIFFERENCE", "COMPARE", "CHANGE", "+6/+6Gi", "-1500m/", "<none>", "nodes' worth", "pods of 2/4Gi", "one usage sample"} {
		if !strings.Contains(table.out, want) {
			t.Errorf("table lacks %q:\n%s", want, table.out)
		}
	}
}

func TestSimulateSamplesForTheDurationAndReportsProgress(t *testing.T) {
	w := simWorld{objects: []runtime.Object{simNode("n1", nil)}, usage: map[string][2]string{"n1": {"2", "1Gi"}}}
	r := simulate(t, w, "--duration", "1m", "--interval", "15s", "-o", "json")
	if r.err != nil {
		t.Fatal(r.err)
	}
	var rep SimulationReport
	if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Samples != 5 || rep.Note != "" || rep.Items[0].NodeSamples != 5 {
		t.Errorf("samples %d (node %d), note %q; want 5 readings, all in the history", rep.Samples, rep.Items[0].NodeSamples, rep.Note)
	}
	for i := 1; i <= 5; i++ {
		if want := "sample " + string(rune('0'+i)) + "/5"; !strings.Contains(r.errOut, want) {
			t.Errorf("progress lacks %q:\n%s", want, r.errOut)
		}
	}
	// Positive control of the progress check: a single reading prints none.
	if one := simulate(t, w, "-o", "json"); strings.Contains(one.errOut, "sample 1/1") {
		t.Errorf("a single reading shows progress:\n%s", one.errOut)
	}
}

func TestSimulateKeepsSamplingWhenALaterReadingFails(t *testing.T) {
	w := simWorld{objects: []runtime.Object{simNode("n1", nil)}, usage: map[string][2]string{"n1": {"2", "1Gi"}}, metricsDownFrom: 2}
	r := simulate(t, w, "--duration", "30s", "--interval", "15s")
	if r.err != nil {
		t.Fatalf("a later failure failed the run: %v", r.err)
	}
	if !strings.Contains(r.errOut, "Warning: sample 2/3") {
		t.Errorf("no warning:\n%s", r.errOut)
	}
}

func TestSimulateFailsClearlyWithoutWriting(t *testing.T) {
	w := simWorld{objects: []runtime.Object{simNode("n1", nil)}, usage: map[string][2]string{"n1": {"2", "1Gi"}}}
	broken := writePolicy(t, "default:\n  cpu:\n    margin: 1.5\n  polciy: usage\n")
	down := w
	down.metricsDownFrom = 1
	for _, tc := range []struct {
		name  string
		w     simWorld
		args  []string
		want  []string
		reads bool
	}{
		{"broken policy file", w, []string{"-f", broken}, []string{"policy file " + broken, "margin", "polciy"}, false},
		{"broken compare file", w, []string{"--compare", broken}, []string{"--compare", "margin"}, false},
		{"missing policy file", w, []string{"-f", "/nonexistent/policy.yaml"}, []string{"reading policy file"}, false},
		{"unknown node", w, []string{"nope"}, []string{`"nope" not found`}, true},
		{"metrics API unreachable", down, nil, []string{"metrics.k8s.io", "unable to handle the request", "metrics-server"}, true},
		{"bad flags, all at once", w, []string{"-f", "x", "--from-cluster", "--pod-shape", "gpu=1", "--interval", "0s", "--sort-by", "size"},
			[]string{"--from-cluster", "--pod-shape", "--interval", "--sort-by"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := simulate(t, tc.w, tc.args...)
			if r.err == nil {
				t.Fatalf("no error; output:\n%s", r.out)
			}
			for _, want := range tc.want {
				if !strings.Contains(r.err.Error(), want) {
					t.Errorf("error lacks %q: %v", want, r.err)
				}
			}
			if len(r.writes) > 0 {
				t.Errorf("wrote: %v", r.writes)
			}
			if !tc.reads && r.reads > 0 {
				t.Errorf("read the cluster %d times before failing on its input", r.reads)
			}
		})
	}
}

func TestSimulateFromClusterReadsTheInstalledPolicy(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-reclaim", Name: "kube-reclaim-policy"},
		Data: map[string]string{"policy.yaml": "default:\n  policy: request\n"}}
	w := simWorld{objects: []runtime.Object{simNode("n1", nil)}, usage: map[string][2]string{"n1": {"2", "1Gi"}}}
	absent := simulateJSON(t, w, "--from-cluster")
	if absent.Items[0].Policy != "usage" || !strings.Contains(absent.Policy, "no ConfigMap kube-reclaim/kube-reclaim-policy") {
		t.Errorf("without ConfigMap: policy %q from %q", absent.Items[0].Policy, absent.Policy)
	}
	w.objects = append(w.objects, cm)
	installed := simulateJSON(t, w, "--from-cluster")
	if installed.Items[0].Policy != "request" || installed.Policy != "ConfigMap kube-reclaim/kube-reclaim-policy" {
		t.Errorf("with ConfigMap: policy %q from %q", installed.Items[0].Policy, installed.Policy)
	}
	cm.Data["policy.yaml"] = "default:\n  policy: nonsense\n"
	if r := simulate(t, w, "--from-cluster"); r.err == nil || !strings.Contains(r.err.Error(), "invalid") {
		t.Errorf("invalid installed policy: %v", r.err)
	}
}

func TestSimulateNodeShowsEveryTerm(t *testing.T) {
	w := simWorld{objects: []runtime.Object{simNode("n1", nil), simNode("n2", nil)}, usage: map[string][2]string{"n1": {"2", "1Gi"}, "n2": {"1", "1Gi"}}}
	r := simulate(t, w, "n1")
	if r.err != nil {
		t.Fatal(r.err)
	}
	for _, want := range []string{"Node:", "n1", "CPU: allocatable - margin - regular-peak-usage", "regular-peak-usage   minus", "= 4500m", "one usage sample"} {
		if !strings.Contains(r.out, want) {
			t.Errorf("output lacks %q:\n%s", want, r.out)
		}
	}
	if strings.Contains(r.out, "n2") {
		t.Errorf("output shows another node:\n%s", r.out)
	}
	rep := simulateJSON(t, w, "n1")
	if len(rep.Items) != 1 || rep.Items[0].Explanation == nil || rep.Items[0].Explanation.CPU.Evaluate() != 4500 {
		t.Errorf("json: %+v", rep.Items)
	}
}

func TestSimulateSortsAndSelects(t *testing.T) {
	w := simWorld{objects: []runtime.Object{simNode("a", map[string]string{"pool": "x"}), simNode("b", map[string]string{"pool": "x"}), simNode("c", nil)},
		usage: map[string][2]string{"a": {"3", "1Gi"}, "b": {"1", "1Gi"}, "c": {"2", "1Gi"}}}
	r := simulate(t, w, "--sort-by", "reclaimable-cpu", "-o", "name")
	if r.err != nil || r.out != "node/b\nnode/c\nnode/a\n" {
		t.Errorf("sorted by reclaimable cpu: %q %v", r.out, r.err)
	}
	sel := simulateJSON(t, w, "-l", "pool=x")
	if len(sel.Items) != 2 || sel.Summary.Nodes != 2 {
		t.Errorf("selector: %d nodes", len(sel.Items))
	}
	if r := simulate(t, w, "-l", "pool=none"); r.err == nil || !strings.Contains(r.err.Error(), "no nodes") {
		t.Errorf("empty selection: %v", r.err)
	}
	if r := simulate(t, w, "-o", "yaml"); r.err != nil || !strings.Contains(r.out, "kind: Simulation") || !strings.Contains(r.out, "podsFit:") {
		t.Errorf("-o yaml: %v\n%s", r.err, r.out)
	}
	if r := simulate(t, w, "-o", "wide", "--no-headers"); r.err != nil || !strings.Contains(r.out, "usage") || strings.Contains(r.out, "NAME") {
		t.Errorf("-o wide --no-headers: %v\n%s", r.err, r.out)
	}
}

func TestPodShape(t *testing.T) {
	for _, tc := range []struct {
		in      map[string]string
		want    reclaimable.Resources
		wantErr bool
	}{
		{map[string]string{"cpu": "2000m", "memory": "4Gi"}, res(2000, 4<<30), false},
		{map[string]string{"cpu": "500m"}, res(500, 0), false},
		{map[string]string{"memory": "1Gi"}, res(0, 1<<30), false},
		{map[string]string{"cpu": "0"}, reclaimable.Resources{}, true},
		{map[string]string{"gpu": "1"}, reclaimable.Resources{}, true},
		{map[string]string{"cpu": "lots"}, reclaimable.Resources{}, true},
		{map[string]string{"cpu": "-1"}, reclaimable.Resources{}, true},
	} {
		got, err := parsePodShape(tc.in)
		if (err != nil) != tc.wantErr || (!tc.wantErr && got != tc.want) {
			t.Errorf("%v: %+v, %v", tc.in, got, err)
		}
	}
	for _, tc := range []struct {
		room, shape reclaimable.Resources
		want        int64
	}{
		{res(4500, 5<<30), res(2000, 4<<30), 1},
		{res(4500, 9<<30), res(2000, 4<<30), 2},
		{res(4500, 0), res(2000, 0), 2},
		{res(0, 9<<30), res(0, 4<<30), 2},
		{res(1999, 100<<30), res(2000, 4<<30), 0},
	} {
		if got := podsFit(tc.room, tc.shape); got != tc.want {
			t.Errorf("%+v of %+v: %d, want %d", tc.room, tc.shape, got, tc.want)
		}
	}
}

func TestSimulationReportDeepCopySharesNothing(t *testing.T) {
	var r SimulationReport
	var n int64
	fill(reflect.ValueOf(&r).Elem(), &n)
	c := r.DeepCopyObject()
	if !reflect.DeepEqual(c, &r) {
		t.Fatalf("copy differs:\n%+v\n%+v", c, &r)
	}
	if p := shared(reflect.ValueOf(&r), reflect.ValueOf(c), ""); p != "" {
		t.Errorf("the copy shares %s with the original", p)
	}
}

func TestSimulateWarnsOfAnUnversionedPolicyAndNamesWhereItCameFrom(t *testing.T) {
	const (
		unversioned = "default:\n  policy: request\n"
		versioned   = "apiVersion: kube-reclaim.io/v1alpha1\nkind: ReclaimPolicy\ndefault:\n  policy: request\n"
	)
	w := simWorld{objects: []runtime.Object{simNode("n1", nil)}, usage: map[string][2]string{"n1": {"2", "1Gi"}}}
	old, current := writePolicy(t, unversioned), writePolicy(t, versioned)
	installed := func(body string) simWorld {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-reclaim", Name: "kube-reclaim-policy"},
			Data: map[string]string{"policy.yaml": body}}
		return simWorld{objects: append([]runtime.Object{cm}, w.objects...), usage: w.usage}
	}
	for _, tc := range []struct {
		name string
		w    simWorld
		args []string
		// from names the source the warning must name; "" for no warning.
		from string
	}{
		{"an unversioned file", w, []string{"-f", old}, "file " + old},
		{"a versioned file", w, []string{"-f", current}, ""},
		{"an unversioned file to compare with", w, []string{"-f", current, "--compare", old}, "file " + old},
		{"an unversioned installed policy", installed(unversioned), []string{"--from-cluster"}, "ConfigMap kube-reclaim/kube-reclaim-policy"},
		{"a versioned installed policy", installed(versioned), []string{"--from-cluster"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := simulate(t, tc.w, append(tc.args, "-o", "json")...)
			if r.err != nil {
				t.Fatalf("simulate: %v", r.err)
			}
			var rep SimulationReport
			if err := json.Unmarshal([]byte(r.out), &rep); err != nil {
				t.Fatalf("not JSON: %v\n%s", err, r.out)
			}
			warned := strings.Contains(r.errOut, policyfile.UnversionedWarning)
			switch {
			case tc.from == "" && warned:
				t.Errorf("warned of a versioned policy:\n%s", r.errOut)
			case tc.from != "" && !strings.Contains(r.errOut, "Warning: policy from "+tc.from+": "+policyfile.UnversionedWarning):
				t.Errorf("no warning naming %s:\n%s", tc.from, r.errOut)
			}
			if len(rep.Items) != 1 || rep.Items[0].Policy != "request" {
				t.Errorf("the file's policy was not used: %+v", rep.Items)
			}
		})
	}
}
