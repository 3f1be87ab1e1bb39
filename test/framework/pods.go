package framework

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-reclaim/kube-reclaim/internal/testobj"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
)

// BatchPod starts the README's batch pod: one container "job", never
// restarted. Its setters go on (NodeSelector, Reclaimed, Enforced, ...) and
// Obj ends it.
func BatchPod(ns, name string) *testobj.PodWrapper {
	return testobj.MakePod().Namespace(ns).Name(name).Label("app", "batch").RestartPolicy(corev1.RestartPolicyNever).
		Container("job", "registry.example/batch:1")
}

// ReclaimedPod asks cpuMilli/memBytes of reclaimed resources with requests
// equal to limits, as the README's batch pod does.
func ReclaimedPod(ns, name string, cpuMilli, memBytes int64) *corev1.Pod {
	return BatchPod(ns, name).Reclaimed(cpuMilli, memBytes).Obj()
}

// ServicePod starts a regular pod: one container "app" that Req gives its
// native requests.
func ServicePod(ns, name string) *testobj.PodWrapper {
	return testobj.MakePod().Namespace(ns).Name(name).Label("app", "service").Container("app", "registry.example/service:1")
}

// RegularPod asks native resources only, so the scheduler places it without
// asking the extender. With node set it is bound directly.
func RegularPod(ns, name, node, cpu, mem string) *corev1.Pod {
	return ServicePod(ns, name).Node(node).Req(cpu, mem).Obj()
}

// CreatePod creates pod, failing the test on an error.
func CreatePod(t testing.TB, c *cluster.Cluster, pod *corev1.Pod) {
	t.Helper()
	if _, err := c.Client.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
}

// CreatePods creates pods concurrently, as a burst of submissions would.
func CreatePods(t testing.TB, c *cluster.Cluster, pods []*corev1.Pod) {
	t.Helper()
	var g errgroup.Group
	g.SetLimit(40)
	for _, p := range pods {
		g.Go(func() error {
			_, err := c.Client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{})
			return err
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

// CreateNamespace creates a namespace unless it exists.
func CreateNamespace(t testing.TB, c *cluster.Cluster, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := c.Client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// PodState is a namespace's live pods at one instant.
type PodState struct {
	// Bookings are the reclaimed requests of the pods bound to each node.
	Bookings map[string]reclaimable.Resources
	BoundTo  map[string]string // pod -> node, bound pods only
	Pending  []string
	Total    int
}

// BoundWithPrefix counts the bound pods whose name starts with prefix.
func (s PodState) BoundWithPrefix(prefix string) int {
	n := 0
	for p := range s.BoundTo {
		if strings.HasPrefix(p, prefix) {
			n++
		}
	}
	return n
}

// Overbooked describes every node whose bookings exceed room.
func (s PodState) Overbooked(room map[string]reclaimable.Resources) []string {
	var out []string
	for node, b := range s.Bookings {
		r := room[node]
		if b.CPUMilli > r.CPUMilli || b.MemoryBytes > r.MemoryBytes {
			out = append(out, node+" over-booked: "+requestString(b)+" bound, room "+requestString(r))
		}
	}
	sort.Strings(out)
	return out
}

func requestString(r reclaimable.Resources) string {
	return resource.NewMilliQuantity(r.CPUMilli, resource.DecimalSI).String() + "/" +
		resource.NewQuantity(r.MemoryBytes, resource.BinarySI).String()
}

// Pods reads the pods of ns that are neither being deleted nor finished.
func Pods(ctx context.Context, c *cluster.Cluster, ns string) (PodState, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return PodState{}, err
	}
	st := PodState{Bookings: map[string]reclaimable.Resources{}, BoundTo: map[string]string{}}
	for i := range list.Items {
		p := &list.Items[i]
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		st.Total++
		if p.Spec.NodeName == "" {
			st.Pending = append(st.Pending, p.Name)
			continue
		}
		r, _ := Names.PodRequest(p)
		st.Bookings[p.Spec.NodeName] = st.Bookings[p.Spec.NodeName].Add(r)
		st.BoundTo[p.Name] = p.Spec.NodeName
	}
	sort.Strings(st.Pending)
	return st, nil
}

// MustPods is Pods that fails the test on an error.
func MustPods(t testing.TB, c *cluster.Cluster, ns string) PodState {
	t.Helper()
	st, err := Pods(context.Background(), c, ns)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// DeleteAllPods deletes every pod of ns at once and waits until they are
// gone. It reports a failure without stopping the test, so that it can run
// in a t.Cleanup followed by more cleanup.
func DeleteAllPods(t testing.TB, c *cluster.Cluster, ns string) {
	t.Helper()
	ctx := context.Background()
	zero := int64(0)
	if err := c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
		t.Errorf("deleting pods in %s: %v", ns, err)
		return
	}
	if _, ok := Poll(90*time.Second, 500*time.Millisecond, func() bool {
		l, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0
	}); !ok {
		t.Errorf("pods in %s not deleted within 90s", ns)
	}
}

// DeletePod deletes one pod at once.
func DeletePod(t testing.TB, c *cluster.Cluster, ns, name string) {
	t.Helper()
	zero := int64(0)
	if err := c.Client.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatalf("deleting pod %s/%s: %v", ns, name, err)
	}
}

// SchedulingMessage returns the newest FailedScheduling message of a pod
// ("" when there is none yet).
func SchedulingMessage(c *cluster.Cluster, ns, pod string) string {
	evs, err := c.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + pod + ",reason=FailedScheduling"})
	if err != nil || len(evs.Items) == 0 {
		return ""
	}
	newest := evs.Items[0]
	for _, e := range evs.Items[1:] {
		if EventTime(e).After(EventTime(newest)) {
			newest = e
		}
	}
	return newest.Message
}

// EventTime is when an Event last happened, whichever field its reporter
// filled. A reporter on the events.k8s.io API (kube-scheduler) keeps
// eventTime at the first occurrence and records repeats in its series.
func EventTime(e corev1.Event) time.Time {
	switch {
	case e.Series != nil && !e.Series.LastObservedTime.IsZero():
		return e.Series.LastObservedTime.Time
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.FirstTimestamp.Time
}
