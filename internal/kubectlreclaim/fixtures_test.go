package kubectlreclaim

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"

	"github.com/kube-reclaim/kube-reclaim/internal/leaderlease"
	"github.com/kube-reclaim/kube-reclaim/internal/leaderlease/leasetest"
	"github.com/kube-reclaim/kube-reclaim/internal/testobj"
	"github.com/kube-reclaim/kube-reclaim/policy"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// now is the fixed clock of every test.
var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

var testNames = reclaimable.MustNames(reclaimable.DefaultDomain)

// world is what the fake API server holds for one test.
type world struct {
	objects []runtime.Object
	// metrics is served by metrics.k8s.io; metricsDown makes that API fail.
	metrics     []metricsv1beta1.NodeMetrics
	metricsDown bool
	// leaseErr is returned by every read of a Lease.
	leaseErr error
	// noLease leaves out the publisher's Lease that run adds, freshly
	// renewed, to a world holding no Lease: the cluster has no publisher.
	noLease bool
	// leaseHistory are the versions of the publisher's Lease, oldest first,
	// served as etcd serves them (leasetest.History) from compactedBefore on;
	// the last is the Lease now.
	leaseHistory    []*coordinationv1.Lease
	compactedBefore uint64
	// reactors answer the list requests of a resource (e.g. "pods") in
	// place of the fake's tracker.
	reactors map[string]clienttesting.ReactionFunc
}

// run executes `kubectl reclaim args...` against w and returns stdout,
// stderr and the error Main would print.
func run(t *testing.T, w world, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	o := NewOptions(genericiooptions.IOStreams{In: &bytes.Buffer{}, Out: &out, ErrOut: &errOut})
	o.Now = func() time.Time { return now }
	o.NewClients = func() (Clients, error) {
		m := metricsfake.NewSimpleClientset()
		// The fake tracker files NodeMetrics under a guessed resource name,
		// so serve the list directly.
		m.PrependReactor("list", "nodes", func(clienttesting.Action) (bool, runtime.Object, error) {
			if w.metricsDown {
				return true, nil, errors.New("the server is currently unable to handle the request")
			}
			return true, &metricsv1beta1.NodeMetricsList{Items: w.metrics}, nil
		})
		objects := w.objects
		if !w.noLease && len(w.leaseHistory) == 0 && !slices.ContainsFunc(objects, func(o runtime.Object) bool { _, ok := o.(*coordinationv1.Lease); return ok }) {
			objects = append(slices.Clip(objects), publisherLease(leaderlease.DefaultNamespace, leaderlease.DefaultName, time.Second))
		}
		kube := fake.NewClientset(objects...)
		if len(w.leaseHistory) > 0 {
			leasetest.History(kube, w.compactedBefore, w.leaseHistory...)
		}
		for resource, react := range w.reactors {
			kube.PrependReactor("list", resource, react)
		}
		if w.leaseErr != nil {
			kube.PrependReactor("get", "leases", func(clienttesting.Action) (bool, runtime.Object, error) {
				return true, nil, w.leaseErr
			})
		}
		return Clients{Kube: kube, Metrics: m}, nil
	}
	cmd := NewCommand(o)
	cmd.SetArgs(args)
	err := cmd.ExecuteContext(context.Background())
	return out.String(), errOut.String(), err
}

// annotated is a bare node carrying annotation a, its status at floor.
func annotated(name string, a reclaimable.Annotation, floor reclaimable.Resources) *corev1.Node {
	return bare(name).Annotation(a).Floor(floor).Obj()
}

func bareNode(name string) *corev1.Node { return bare(name).Obj() }

// bare is a node of 16 cores and 64Gi that kube-reclaim has not touched.
func bare(name string) *testobj.NodeWrapper {
	return testobj.MakeNode().Name(name).Label("kubernetes.io/hostname", name).NoAnnotations().Capacity("16", "64Gi")
}

// pod is a pod in namespace ns on node ("" for unbound) asking cpu/memory
// of the reclaimed resources (requests == limits) when they are not empty.
func pod(ns, name, node, cpu, memory string, phase corev1.PodPhase) *corev1.Pod {
	return testobj.MakePod().Namespace(ns).Name(name).UID(ns+"/"+name).CreatedAt(now.Add(-5*time.Minute)).Label("app", name).
		Node(node).Container("c", "busybox").Reclaimed(amount(cpu), amount(memory)).Phase(phase).Obj()
}

// amount is the value of quantity q, 0 when q is empty.
func amount(q string) int64 {
	if q == "" {
		return 0
	}
	v := resource.MustParse(q)
	return v.Value()
}

func nodeMetrics(name string, cpu, memory string, ago time.Duration) metricsv1beta1.NodeMetrics {
	return metricsv1beta1.NodeMetrics{
		// metrics-server copies the node's labels; bareNode has this one.
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}},
		Timestamp:  metav1.NewTime(now.Add(-ago)),
		Window:     metav1.Duration{Duration: 15 * time.Second},
		Usage:      corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(memory)},
	}
}

const gib = int64(1) << 30

// usageExplanation is what the usage policy writes for a 16-core / 64Gi
// node: 10% margin, p95 peak, one unmeasured pod, cap at 50%.
func usageExplanation() *reclaimable.Explanation {
	return &reclaimable.Explanation{
		CPU: reclaimable.ResourceExplanation{Result: 4900, Terms: []reclaimable.Term{
			{Name: policy.TermAllocatable, Op: reclaimable.OpBase, Value: 16000},
			{Name: policy.TermMargin, Op: reclaimable.OpSubtract, Value: 1600, Note: "10% of allocatable kept unreclaimed"},
			{Name: policy.TermRegularPeakUsage, Op: reclaimable.OpSubtract, Value: 9000, Note: "p95 over 5m0s of 20 samples: node usage minus reclaimed pods' usage"},
			{Name: policy.TermSystemUsage, Op: reclaimable.OpInfo, Value: 700, Note: "node usage beyond its pods, same statistic; included in regular-peak-usage"},
			{Name: policy.TermUnmeasuredRequests, Op: reclaimable.OpSubtract, Value: 500, Note: "requests of 1 regular pods without usage samples"},
			{Name: policy.TermFloor, Op: reclaimable.OpFloor, Value: 0},
			{Name: policy.TermCap, Op: reclaimable.OpCap, Value: 8000, Note: "50% of allocatable at most"},
			{Name: policy.TermMinimum, Op: reclaimable.OpMinimum, Value: 0},
		}},
		Memory: reclaimable.ResourceExplanation{Result: 17824114278, Terms: []reclaimable.Term{
			{Name: policy.TermAllocatable, Op: reclaimable.OpBase, Value: 64 * gib},
			{Name: policy.TermMargin, Op: reclaimable.OpSubtract, Value: 6871947674, Note: "10% of allocatable kept unreclaimed"},
			{Name: policy.TermRegularPeakUsage, Op: reclaimable.OpSubtract, Value: 40 * gib, Note: "p95 over 5m0s of 20 samples: node usage minus reclaimed pods' usage"},
			{Name: policy.TermSystemUsage, Op: reclaimable.OpInfo, Value: 2 * gib, Note: "node usage beyond its pods, same statistic; included in regular-peak-usage"},
			{Name: policy.TermUnmeasuredRequests, Op: reclaimable.OpSubtract, Value: gib, Note: "requests of 1 regular pods without usage samples"},
			{Name: policy.TermFloor, Op: reclaimable.OpFloor, Value: 0},
			{Name: policy.TermCap, Op: reclaimable.OpCap, Value: 32 * gib, Note: "50% of allocatable at most"},
			{Name: policy.TermMinimum, Op: reclaimable.OpMinimum, Value: 0},
		}},
	}
}

// res is a cpu/memory pair in millicores and bytes.
func res(cpuMilli, memoryBytes int64) reclaimable.Resources {
	return reclaimable.Resources{CPUMilli: cpuMilli, MemoryBytes: memoryBytes}
}

func mustQuantity(s string) resource.Quantity { return resource.MustParse(s) }
