package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
)

var names = reclaimable.MustNames(reclaimable.DefaultDomain)

const gib = int64(1) << 30

// pollUntil calls f every interval until it returns true or timeout passes;
// it returns the time it took and whether f succeeded.
func pollUntil(timeout, interval time.Duration, f func() bool) (time.Duration, bool) {
	start := time.Now()
	for {
		if f() {
			return time.Since(start), true
		}
		if time.Since(start) > timeout {
			return time.Since(start), false
		}
		time.Sleep(interval)
	}
}

// sumMetric returns the sum of every sample of a Prometheus metric (text
// format) whose label set contains every given label="value" pair.
func sumMetric(body io.Reader, name string, labels ...string) float64 {
	var sum float64
	sc := bufio.NewScanner(body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) || (len(line) > len(name) && line[len(name)] != '{' && line[len(name)] != ' ') {
			continue
		}
		match := true
		for _, l := range labels {
			match = match && strings.Contains(line, l)
		}
		if !match {
			continue
		}
		f := strings.Fields(line)
		if v, err := strconv.ParseFloat(f[len(f)-1], 64); err == nil {
			sum += v
		}
	}
	return sum
}

// scrape reads a metric from a role's /metrics on the health port.
func scrape(t *testing.T, port int, name string, labels ...string) float64 {
	t.Helper()
	v, err := scrapeErr(port, name, labels...)
	if err != nil {
		t.Fatalf("scraping %s on port %d: %v", name, port, err)
	}
	return v
}

func scrapeErr(port int, name string, labels ...string) (float64, error) {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", port))
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("HTTP %d", resp.StatusCode)
	}
	return sumMetric(resp.Body, name, labels...), nil
}

func httpStatus(url string) (int, error) {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, nil
}

// apiserverMetric reads a metric from kube-apiserver's /metrics.
func apiserverMetric(t *testing.T, c *cluster.Cluster, name string, labels ...string) float64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	body, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatalf("kube-apiserver /metrics: %v", err)
	}
	return sumMetric(bytes.NewReader(body), name, labels...)
}

// nodeView is what a test reads from one node: the published annotation,
// the reclaimed values in status, readiness and the last heartbeat.
type nodeView struct {
	node *corev1.Node
	// ann is the parsed annotation, nil when absent or invalid.
	ann *reclaimable.Annotation
	raw string
	// fresh is the verdict a webhook or extender with --stale-after=staleAfter
	// reaches now (lease not considered).
	fresh reclaimable.Freshness
	// capacity and allocatable are the reclaimed values in status (0 when absent).
	capacity, allocatable reclaimable.Resources
	hasStatus             bool
	ready                 bool
	heartbeat             time.Time
	allocCPU, allocMem    int64
}

// published is what the annotation offers right now (zero unless fresh).
func (v nodeView) published() reclaimable.Resources { return v.fresh.Values }

// statusMatchesAnnotation reports whether capacity and allocatable both carry
// the annotation's values.
func (v nodeView) statusMatchesAnnotation() bool {
	if v.ann == nil || !v.hasStatus {
		return false
	}
	want := reclaimable.Resources{CPUMilli: v.ann.CPUMilli, MemoryBytes: v.ann.MemoryBytes}
	return v.capacity == want && v.allocatable == want
}

func viewOf(n *corev1.Node, now time.Time) nodeView {
	v := nodeView{node: n, ready: cluster.NodeReady(n), heartbeat: readyHeartbeat(n),
		allocCPU: n.Status.Allocatable.Cpu().MilliValue(), allocMem: n.Status.Allocatable.Memory().Value()}
	raw, present := n.Annotations[names.Annotation]
	v.raw = raw
	if a, err := reclaimable.Parse(raw); err == nil {
		v.ann = &a
	}
	v.fresh = reclaimable.Judge(raw, present, now, staleAfter, true)
	get := func(l corev1.ResourceList) (reclaimable.Resources, bool) {
		cq, okc := l[names.CPU]
		mq, okm := l[names.Memory]
		return reclaimable.Resources{CPUMilli: cq.Value(), MemoryBytes: mq.Value()}, okc && okm
	}
	var okc, oka bool
	v.capacity, okc = get(n.Status.Capacity)
	v.allocatable, oka = get(n.Status.Allocatable)
	v.hasStatus = okc && oka
	return v
}

// views lists the named nodes (every node when names is empty).
func views(ctx context.Context, c *cluster.Cluster, only []string) (map[string]nodeView, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	list, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, n := range only {
		want[n] = true
	}
	now := time.Now()
	out := map[string]nodeView{}
	for i := range list.Items {
		n := &list.Items[i]
		if len(want) == 0 || want[n.Name] {
			out[n.Name] = viewOf(n, now)
		}
	}
	return out, nil
}

func readyHeartbeat(n *corev1.Node) time.Time {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.LastHeartbeatTime.Time
		}
	}
	return time.Time{}
}

// reclaimedPod asks cpuMilli/memBytes of reclaimed resources with requests
// equal to limits, as the README's batch pod does.
func reclaimedPod(ns, name string, cpuMilli, memBytes int64) *corev1.Pod {
	r := corev1.ResourceList{
		names.CPU:    *resource.NewQuantity(cpuMilli, resource.DecimalSI),
		names.Memory: *resource.NewQuantity(memBytes, resource.BinarySI),
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "batch"}},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers: []corev1.Container{{Name: "job", Image: "registry.example/batch:1",
				Resources: corev1.ResourceRequirements{Requests: r, Limits: r.DeepCopy()}}},
		},
	}
}

// regularPod asks native resources only; the scheduler places it without
// the extender. With node set it is bound directly.
func regularPod(ns, name, node, cpu, mem string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": "service"}},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "registry.example/service:1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}}}}},
	}
}

func mustCreatePod(t *testing.T, c *cluster.Cluster, pod *corev1.Pod) {
	t.Helper()
	if _, err := c.Client.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating pod %s/%s: %v", pod.Namespace, pod.Name, err)
	}
}

func createPodsConcurrently(t *testing.T, c *cluster.Cluster, pods []*corev1.Pod) {
	t.Helper()
	var wg sync.WaitGroup
	errs := make(chan error, len(pods))
	sem := make(chan struct{}, 40)
	for _, p := range pods {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			if _, err := c.Client.CoreV1().Pods(p.Namespace).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// podState is a namespace's pods at one instant.
type podState struct {
	// bookings are the reclaimed requests of the non-terminal pods bound to
	// each node.
	bookings map[string]reclaimable.Resources
	boundTo  map[string]string // pod -> node, bound pods only
	pending  []string
	total    int
}

func podsIn(ctx context.Context, c *cluster.Cluster, ns string) (podState, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return podState{}, err
	}
	st := podState{bookings: map[string]reclaimable.Resources{}, boundTo: map[string]string{}}
	for i := range list.Items {
		p := &list.Items[i]
		if p.DeletionTimestamp != nil || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed {
			continue
		}
		st.total++
		if p.Spec.NodeName == "" {
			st.pending = append(st.pending, p.Name)
			continue
		}
		r, _ := names.PodRequest(p)
		st.bookings[p.Spec.NodeName] = st.bookings[p.Spec.NodeName].Add(r)
		st.boundTo[p.Name] = p.Spec.NodeName
	}
	sort.Strings(st.pending)
	return st, nil
}

func mustPods(t *testing.T, c *cluster.Cluster, ns string) podState {
	t.Helper()
	st, err := podsIn(context.Background(), c, ns)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// deleteAllPods deletes every pod of ns at once and waits until they are gone.
func deleteAllPods(t *testing.T, c *cluster.Cluster, ns string) {
	t.Helper()
	ctx := context.Background()
	zero := int64(0)
	if err := c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &zero}, metav1.ListOptions{}); err != nil {
		t.Errorf("deleting pods in %s: %v", ns, err)
		return
	}
	if _, ok := pollUntil(90*time.Second, 500*time.Millisecond, func() bool {
		l, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		return err == nil && len(l.Items) == 0
	}); !ok {
		t.Errorf("pods in %s not deleted within 90s", ns)
	}
}

func mustNamespace(t *testing.T, c *cluster.Cluster, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := c.Client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil && !strings.Contains(err.Error(), "already exists") {
		t.Fatal(err)
	}
}

// schedulingMessage returns the newest FailedScheduling message of a pod.
func schedulingMessage(c *cluster.Cluster, ns, pod string) string {
	evs, err := c.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{
		FieldSelector: "involvedObject.name=" + pod + ",reason=FailedScheduling"})
	if err != nil || len(evs.Items) == 0 {
		return ""
	}
	newest := evs.Items[0]
	for _, e := range evs.Items[1:] {
		if eventTime(e).After(eventTime(newest)) {
			newest = e
		}
	}
	return newest.Message
}

func eventTime(e corev1.Event) time.Time {
	switch {
	case !e.LastTimestamp.IsZero():
		return e.LastTimestamp.Time
	case !e.EventTime.IsZero():
		return e.EventTime.Time
	}
	return e.FirstTimestamp.Time
}

// patchNode merge-patches a node (or its status) and returns the stored result.
func patchNode(ctx context.Context, c *cluster.Cluster, node string, patch map[string]interface{}, subresources ...string) (*corev1.Node, error) {
	body, err := json.Marshal(patch)
	if err != nil {
		return nil, err
	}
	return c.Client.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, body, metav1.PatchOptions{}, subresources...)
}

// auditEvent is the part of an apiserver audit event the tests read.
type auditEvent struct {
	Verb      string `json:"verb"`
	Stage     string `json:"stage"`
	UserAgent string `json:"userAgent"`
	ObjectRef struct {
		Resource    string `json:"resource"`
		Subresource string `json:"subresource"`
		Name        string `json:"name"`
	} `json:"objectRef"`
	ResponseStatus struct {
		Code    int    `json:"code"`
		Message string `json:"message"`
	} `json:"responseStatus"`
	StageTimestamp time.Time `json:"stageTimestamp"`
}

// nodeStatusWritesAuditPolicy records every write to nodes/status.
const nodeStatusWritesAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  resources:
  - group: ""
    resources: ["nodes/status"]
  verbs: ["patch", "update"]
- level: None
`

// statusWrites reads the audit log: the completed nodes/status writes in
// [from, to].
func statusWrites(t *testing.T, c *cluster.Cluster, from, to time.Time) []auditEvent {
	t.Helper()
	f, err := os.Open(c.AuditLogPath())
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []auditEvent
	dec := json.NewDecoder(f)
	for {
		var e auditEvent
		if err := dec.Decode(&e); err == io.EOF {
			break
		} else if err != nil {
			// The apiserver may be writing the last line right now.
			break
		}
		if e.Stage == "ResponseComplete" && e.ObjectRef.Resource == "nodes" && e.ObjectRef.Subresource == "status" &&
			!e.StageTimestamp.Before(from) && !e.StageTimestamp.After(to) {
			out = append(out, e)
		}
	}
	return out
}

// checkStatusWrites fails the test for every nodes/status write in [from, to]
// that the apiserver answered with an error, and returns how many writes each
// writer (user agent up to the first '/') made.
func checkStatusWrites(t *testing.T, c *cluster.Cluster, from, to time.Time) map[string]int {
	t.Helper()
	// The audit log is written in batches of up to a second.
	time.Sleep(2 * time.Second)
	byWriter := map[string]int{}
	failed := 0
	for _, e := range statusWrites(t, c, from, to) {
		agent, _, _ := strings.Cut(e.UserAgent, "/")
		byWriter[agent]++
		if e.ResponseStatus.Code >= 400 {
			failed++
			if failed <= 5 {
				t.Errorf("nodes/%s status %s by %s failed: %d %s", e.ObjectRef.Name, e.Verb, e.UserAgent, e.ResponseStatus.Code, e.ResponseStatus.Message)
			}
		}
	}
	if failed > 5 {
		t.Errorf("... %d failed node status writes in all", failed)
	}
	return byWriter
}

// marginOf is ceil(alloc x margin), as the policy computes it (in parts per
// million, rounding up).
func marginOf(alloc int64, margin float64) int64 {
	ppm := int64(math.Round(margin * 1e6))
	return (alloc*ppm + 999_999) / 1_000_000
}

func mib(b int64) string { return fmt.Sprintf("%.1fMi", float64(b)/(1<<20)) }
