package extender

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/kube-reclaim/kube-reclaim/placement"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/benchfixture"
	"github.com/kube-reclaim/kube-reclaim/test/cputime"
)

// benchCluster is a cache of nodes with 30 reclaimed pods each: 5 % of the
// nodes stale, 10 % too full for the benchmark pod, the rest with room.
func benchCluster(tb testing.TB, nodes int) (*server, []string) {
	tb.Helper()
	m := newMetrics(prometheus.NewRegistry())
	c := placement.NewCache(10*time.Minute, 30*time.Second, bindAPITimeout, nil, m.cache)
	c.SetClock(func() time.Time { return t0 }, func(time.Time) bool { return true })
	names := make([]string, nodes)
	store := mapPods{}
	for i := range nodes {
		names[i] = fmt.Sprintf("worker-pool-a-%05d.cluster.example.com", i)
		written := t0.Add(-time.Minute)
		if i%20 == 7 {
			written = t0.Add(-time.Hour) // stale
		}
		a := reclaimable.Annotation{CPUMilli: 64000, MemoryBytes: 256 * gi, Policy: "usage", MetricsTime: written, WriteTime: written}
		v, _ := a.Marshal()
		c.SetNode((&nodeRecord{name: names[i], annotation: v, present: true, allocatable: req(96000, 384*gi)}).node())
		per := req(1000, 4*gi)
		if i%10 == 3 {
			per = req(2100, 8*gi) // 63000m / 240Gi used: no room for 2000m / 8Gi
		}
		for j := range 30 {
			p := &podRecord{namespace: "batch", name: fmt.Sprintf("p-%d-%d", i, j),
				uid: types.UID(fmt.Sprintf("uid-%d-%d", i, j)), nodeName: names[i], req: per}
			c.SetPod(p.pod())
			store[p.namespace+"/"+p.name] = p
		}
	}
	// store stands for the pod informer's store: its records stay live, as
	// in production, for the garbage collector to mark.
	s := newServer(testNames, StrategySpread, c, store, nil, func() bool { return true }, m)
	return s, names
}

type mapPods map[string]*podRecord

func (m mapPods) pod(namespace, name string) (*podRecord, bool) {
	p, ok := m[namespace+"/"+name]
	return p, ok
}

// realisticPod is what kube-scheduler sends: a Job pod with managedFields,
// labels, env, probes, a projected token volume and status conditions.
func realisticPod() *corev1.Pod {
	q := resource.MustParse
	rl := corev1.ResourceList{testNames.CPU: q("2000"), testNames.Memory: q("8Gi")}
	fields := func(s string) *metav1.FieldsV1 { return &metav1.FieldsV1{Raw: []byte(s)} }
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: "etl-nightly-29012345-abcde", GenerateName: "etl-nightly-29012345-", Namespace: "batch",
			UID: "6f1c2d9e-3b4a-4c5d-8e7f-0123456789ab", ResourceVersion: "123456789",
			CreationTimestamp: metav1.NewTime(t0),
			Labels: map[string]string{"app.kubernetes.io/name": "etl", "batch.kubernetes.io/controller-uid": "0d1e2f3a-4b5c-6d7e-8f90-a1b2c3d4e5f6",
				"batch.kubernetes.io/job-name": "etl-nightly-29012345", "controller-uid": "0d1e2f3a-4b5c-6d7e-8f90-a1b2c3d4e5f6", "job-name": "etl-nightly-29012345"},
			Annotations:     map[string]string{"batch.kubernetes.io/job-tracking": "", "kubectl.kubernetes.io/default-container": "main"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "batch/v1", Kind: "Job", Name: "etl-nightly-29012345", UID: "0d1e2f3a-4b5c-6d7e-8f90-a1b2c3d4e5f6"}},
			Finalizers:      []string{"batch.kubernetes.io/job-tracking"},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: "Update", APIVersion: "v1",
				Time: &metav1.Time{Time: t0}, FieldsType: "FieldsV1", FieldsV1: fields(`{"f:metadata":{"f:finalizers":{".":{},"v:\"batch.kubernetes.io/job-tracking\"":{}},"f:generateName":{},"f:labels":{".":{},"f:batch.kubernetes.io/controller-uid":{},"f:batch.kubernetes.io/job-name":{},"f:controller-uid":{},"f:job-name":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"0d1e2f3a-4b5c-6d7e-8f90-a1b2c3d4e5f6\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"main\"}":{".":{},"f:args":{},"f:env":{".":{},"k:{\"name\":\"INPUT\"}":{".":{},"f:name":{},"f:value":{}}},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:resources":{".":{},"f:limits":{".":{},"f:kube-reclaim.io/reclaimed-cpu":{},"f:kube-reclaim.io/reclaimed-memory":{}},"f:requests":{".":{},"f:kube-reclaim.io/reclaimed-cpu":{},"f:kube-reclaim.io/reclaimed-memory":{}}},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{},"f:terminationGracePeriodSeconds":{}}}`)},
				{Manager: "kube-reclaim-scheduler", Operation: "Update", APIVersion: "v1", Subresource: "status",
					Time: &metav1.Time{Time: t0}, FieldsType: "FieldsV1", FieldsV1: fields(`{"f:status":{"f:conditions":{".":{},"k:{\"type\":\"PodScheduled\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:message":{},"f:reason":{},"f:status":{},"f:type":{}}}}}`)}},
		},
		Spec: corev1.PodSpec{
			SchedulerName: SchedulerName, RestartPolicy: corev1.RestartPolicyNever, ServiceAccountName: "default",
			Containers: []corev1.Container{{
				Name: "main", Image: "registry.example.com/data/etl:2025.03.01", Args: []string{"--input=s3://bucket/day", "--parallel=8"},
				Env:          []corev1.EnvVar{{Name: "INPUT", Value: "s3://bucket/day"}, {Name: "GOMAXPROCS", Value: "2"}},
				Resources:    corev1.ResourceRequirements{Requests: rl, Limits: rl.DeepCopy()},
				VolumeMounts: []corev1.VolumeMount{{Name: "kube-api-access-x7k2p", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
				LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/bin/true"}}},
					PeriodSeconds: 30},
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				ImagePullPolicy: corev1.PullIfNotPresent,
			}},
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
			},
			Volumes: []corev1.Volume{{Name: "kube-api-access-x7k2p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"},
						Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
				}}}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodPending, QOSClass: corev1.PodQOSBestEffort, Conditions: []corev1.PodCondition{{
			Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable",
			Message: "0/5000 nodes are available: 500 reclaimed-cpu: need 2000m, free 1000m."}}},
	}
}

// benchmarkVerbs runs filter and prioritize b.N times each and reports the
// server time percentiles next to ns/op (one op = one filter plus one
// prioritize): wall clock per verb and for both, and the CPU time of both
// (both-cpu), which a busy machine does not inflate.
func benchmarkVerbs(b *testing.B, nodes int) {
	s, names := benchCluster(b, nodes)
	h := s.handler()
	body, err := json.Marshal(extenderv1.ExtenderArgs{Pod: realisticPod(), NodeNames: &names})
	if err != nil {
		b.Fatal(err)
	}
	// Sanity: the answer is what the cluster implies.
	var fr extenderv1.ExtenderFilterResult
	rec := serve(h, "/filter", body)
	if err := json.Unmarshal(rec.Body.Bytes(), &fr); err != nil || len(*fr.NodeNames) != nodes-nodes/20-nodes/10 {
		b.Fatalf("filter passed %d of %d nodes (err %v)", len(deref(fr.NodeNames)), nodes, err)
	}
	filterD := make([]time.Duration, 0, b.N)
	prioD := make([]time.Duration, 0, b.N)
	bothD := make([]time.Duration, 0, b.N)
	cpuD := make([]time.Duration, 0, b.N)
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	b.SetBytes(int64(len(body)) * 2)
	b.ReportAllocs()
	b.ResetTimer()
	w := &benchfixture.DiscardWriter{}
	filterReq := &bodyRequest{body: body}
	prioReq := &bodyRequest{body: body}
	for range b.N {
		fr, pr := filterReq.next("/filter"), prioReq.next("/prioritize")
		cpu0, cpuOK := cputime.Thread()
		start := time.Now()
		h.ServeHTTP(w, fr)
		mid := time.Now()
		h.ServeHTTP(w, pr)
		end := time.Now()
		if cpu1, ok := cputime.Thread(); ok && cpuOK {
			cpuD = append(cpuD, cpu1-cpu0)
		}
		if w.Code != http.StatusOK {
			b.Fatalf("status %d", w.Code)
		}
		filterD = append(filterD, mid.Sub(start))
		prioD = append(prioD, end.Sub(mid))
		bothD = append(bothD, end.Sub(start))
	}
	b.StopTimer()
	for _, d := range []struct {
		name string
		v    []time.Duration
	}{{"filter", filterD}, {"prioritize", prioD}, {"both", bothD}, {"both-cpu", cpuD}} {
		if len(d.v) == 0 {
			continue
		}
		p50, p99 := percentiles(d.v)
		b.ReportMetric(float64(p50.Nanoseconds()), d.name+"-p50-ns")
		b.ReportMetric(float64(p99.Nanoseconds()), d.name+"-p99-ns")
	}
}

// bodyRequest builds a POST of body, as the server would get it.
type bodyRequest struct {
	body []byte
	rd   bytes.Reader
}

func (r *bodyRequest) next(path string) *http.Request {
	r.rd.Reset(r.body)
	req := httptest.NewRequest(http.MethodPost, path, &r.rd)
	req.ContentLength = int64(len(r.body))
	return req
}

func serve(h http.Handler, path string, body []byte) *httptest.ResponseRecorder {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body)))
	if rec.Code != http.StatusOK {
		panic(fmt.Sprintf("%s: %d %s", path, rec.Code, rec.Body.String()))
	}
	return rec
}

func percentiles(d []time.Duration) (p50, p99 time.Duration) {
	if len(d) == 0 {
		return 0, 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)*50/100], s[min(len(s)*99/100, len(s)-1)]
}

// BenchmarkFilterPrioritize measures the server time of one filter plus one
// prioritize call through the HTTP handler (no network) with 30 pods per
// node. Goal P3 (docs/design.md#p3-extender, hack/bench/goals.go) is on its
// p99 for 500 and for 5000 names.
func BenchmarkFilterPrioritize(b *testing.B) {
	for _, n := range []int{500, 5000} {
		b.Run(fmt.Sprintf("nodes=%d", n), func(b *testing.B) { benchmarkVerbs(b, n) })
	}
}

// BenchmarkAssume measures bind's check-and-assume under the cache lock (the
// Binding API call is not the extender's cost).
func BenchmarkAssume(b *testing.B) {
	s, all := benchCluster(b, 5000)
	var names []string // the nodes with room
	for i, n := range all {
		if i%20 != 7 && i%10 != 3 {
			names = append(names, n)
		}
	}
	uids := make([]types.UID, b.N)
	for i := range uids {
		uids[i] = types.UID(fmt.Sprint(i))
	}
	r := req(1, 1)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		a, err := s.cache.Assume(uids[i], "batch/p", names[i%len(names)], r)
		if err != nil {
			b.Fatal(err)
		}
		s.cache.Bound(a, true)
	}
}
