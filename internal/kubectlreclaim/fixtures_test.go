package kubectlreclaim

import (
	"bytes"
	"context"
	"errors"
	"github.com/kube-reclaim/kube-reclaim/internal/leaderlease"
	"github.com/kube-reclaim/kube-reclaim/internal/leaderlease/leasetest"
	"slices"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/cli-runtime/pkg/genericiooptions"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"

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

func annotated(name string, a reclaimable.Annotation, status reclaimable.Resources) *corev1.Node {
	v, err := a.Marshal()
	if err != nil {
		panic(err)
	}
	n := bareNode(name)
	n.Annotations[testNames.Annotation] = v
	for _, l := range []corev1.ResourceList{n.Status.Capacity, n.Status.Allocatable} {
		l[testNames.CPU] = *resource.NewQuantity(status.CPUMilli, resource.DecimalSI)
		l[testNames.Memory] = *resource.NewQuantity(status.MemoryBytes, resource.BinarySI)
	}
	return n
}

func bareNode(name string) *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name}, Annotations: map[string]string{}},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("16"), corev1.ResourceMemory: resource.MustParse("64Gi")},
		},
	}
}

// pod is a pod in namespace ns on node ("" for unbound) asking cpu/memory
// of the reclaimed resources (requests == limits) when they are not empty.
func pod(ns, name, node, cpu, memory string, phase corev1.PodPhase) *corev1.Pod {
	res := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	if cpu != "" {
		res.Requests[testNames.CPU] = resource.MustParse(cpu)
		res.Limits[testNames.CPU] = resource.MustParse(cpu)
	}
	if memory != "" {
		res.Requests[testNames.Memory] = resource.MustParse(memory)
		res.Limits[testNames.Memory] = resource.MustParse(memory)
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name),
			CreationTimestamp: metav1.NewTime(now.Add(-5 * time.Minute)), Labels: map[string]string{"app": name}},
		Spec:   corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox", Resources: res}}},
		Status: corev1.PodStatus{Phase: phase},
	}
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
