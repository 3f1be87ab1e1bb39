package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	kjson "k8s.io/apimachinery/pkg/runtime/serializer/json"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/scheme"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsscheme "k8s.io/metrics/pkg/client/clientset/versioned/scheme"

	"github.com/kube-reclaim/kube-reclaim/enforcement"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// fakeAPI is just enough of kube-apiserver and metrics.k8s.io for the
// publisher and the extender to run at a size a 2-core machine cannot hold
// in a real control plane: list and watch of nodes and pods (JSON, or
// protobuf when asked; paginated by limit and continue as kube-apiserver
// does, except at resourceVersion "0", which it serves from its watch cache
// in one piece), node and node-status merge patches (applied and sent to
// node watchers), NodeMetrics and PodMetrics lists (JSON or protobuf), and
// Events accepted and dropped. Selectors and authentication are ignored.
type fakeAPI struct {
	srv *http.Server
	url string

	mu    sync.Mutex
	rv    int64
	nodes map[string]*corev1.Node
	order []string
	// watchers get every patched node; each encodes it as it asked.
	watchers map[chan *corev1.Node]struct{}

	pods              *corev1.PodList
	podJSON, podProto []byte
	metricsMu         sync.Mutex
	metricsAt         time.Time
	// the metrics lists encoded, by content type: [0] JSON, [1] protobuf
	nodeMetricsBody [2][]byte
	podMetricsBody  [2][]byte
	nodeMetrics     *metricsv1beta1.NodeMetricsList
	podMetrics      *metricsv1beta1.PodMetricsList

	statsMu  sync.Mutex
	requests map[string]int
}

var (
	protoSerializer = protobuf.NewSerializer(scheme.Scheme, scheme.Scheme)
	// rawProtoSerializer encodes the envelope of a protobuf watch stream, as
	// kube-apiserver's stream serializer does: without the magic prefix.
	rawProtoSerializer = protobuf.NewRawSerializer(scheme.Scheme, scheme.Scheme)
	jsonSerializer     = kjson.NewSerializerWithOptions(kjson.DefaultMetaFactory, scheme.Scheme, scheme.Scheme, kjson.SerializerOptions{})
)

// newFakeAPI builds nodes × podsPerNode pods (reclaimedPerNode of them
// asking reclaimed resources) shaped like a real cluster's objects.
func newFakeAPI(nodes, podsPerNode, reclaimedPerNode int) (*fakeAPI, error) {
	f := &fakeAPI{rv: 1000, nodes: map[string]*corev1.Node{}, watchers: map[chan *corev1.Node]struct{}{}, requests: map[string]int{},
		nodeMetrics: &metricsv1beta1.NodeMetricsList{TypeMeta: metav1.TypeMeta{Kind: "NodeMetricsList", APIVersion: "metrics.k8s.io/v1beta1"}},
		podMetrics:  &metricsv1beta1.PodMetricsList{TypeMeta: metav1.TypeMeta{Kind: "PodMetricsList", APIVersion: "metrics.k8s.io/v1beta1"}},
	}
	names := reclaimable.MustNames(reclaimable.DefaultDomain)
	pods := &corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, ListMeta: metav1.ListMeta{ResourceVersion: "1000"}}
	created := metav1.NewTime(time.Now().Add(-24 * time.Hour).UTC().Truncate(time.Second))
	for i := range nodes {
		n := fakeNode(i, created)
		f.nodes[n.Name] = n
		f.order = append(f.order, n.Name)
		f.nodeMetrics.Items = append(f.nodeMetrics.Items, metricsv1beta1.NodeMetrics{ObjectMeta: metav1.ObjectMeta{Name: n.Name},
			Window: metav1.Duration{Duration: 15 * time.Second},
			Usage: corev1.ResourceList{corev1.ResourceCPU: *resource.NewMilliQuantity(8000+int64(i*37%6000), resource.DecimalSI),
				corev1.ResourceMemory: *resource.NewQuantity(40<<30+int64(i*101%24)<<30, resource.BinarySI)}})
		for j := range podsPerNode {
			p, err := fakePod(names, n.Name, i, j, j >= podsPerNode-reclaimedPerNode, created)
			if err != nil {
				return nil, err
			}
			pods.Items = append(pods.Items, *p)
			f.podMetrics.Items = append(f.podMetrics.Items, metricsv1beta1.PodMetrics{
				ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace, Labels: p.Labels},
				Window:     metav1.Duration{Duration: 15 * time.Second},
				Containers: []metricsv1beta1.ContainerMetrics{{Name: "main", Usage: corev1.ResourceList{
					corev1.ResourceCPU:    *resource.NewMilliQuantity(100+int64((i+j*7)%400), resource.DecimalSI),
					corev1.ResourceMemory: *resource.NewQuantity(512<<20+int64((i*3+j)%512)<<20, resource.BinarySI)}}},
			})
		}
	}
	var err error
	if f.podJSON, err = json.Marshal(pods); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if err := protoSerializer.Encode(pods, &b); err != nil {
		return nil, err
	}
	f.podProto = b.Bytes()
	f.pods = pods
	return f, nil
}

func fakeNode(i int, created metav1.Time) *corev1.Node {
	name := fmt.Sprintf("worker-pool-a-%05d.cluster.example.com", i)
	rl := func(cpu, mem string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem),
			corev1.ResourcePods: resource.MustParse("110"), corev1.ResourceEphemeralStorage: resource.MustParse("100Gi")}
	}
	n := &corev1.Node{
		TypeMeta: metav1.TypeMeta{Kind: "Node", APIVersion: "v1"},
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(fmt.Sprintf("node-uid-%05d", i)), ResourceVersion: "1000", CreationTimestamp: created,
			Labels: map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
				"node.kubernetes.io/instance-type": "m6i.8xlarge", "topology.kubernetes.io/zone": fmt.Sprintf("eu-west-1%c", 'a'+i%3),
				"topology.kubernetes.io/region": "eu-west-1"},
			Annotations: map[string]string{"node.alpha.kubernetes.io/ttl": "0", "volumes.kubernetes.io/controller-managed-attach-detach": "true"}},
		Spec: corev1.NodeSpec{PodCIDR: fmt.Sprintf("10.%d.%d.0/24", 100+i/256, i%256), ProviderID: "aws:///eu-west-1a/i-0" + strconv.Itoa(100000+i)},
		Status: corev1.NodeStatus{Capacity: rl("32", "128Gi"), Allocatable: rl("31", "120Gi"),
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: fmt.Sprintf("10.20.%d.%d", i/256, i%256)}, {Type: corev1.NodeHostName, Address: name}},
			NodeInfo:  corev1.NodeSystemInfo{KubeletVersion: "v1.34.4", ContainerRuntimeVersion: "containerd://2.1.4", OSImage: "Bottlerocket", Architecture: "amd64", OperatingSystem: "linux"}},
	}
	for _, c := range []corev1.NodeConditionType{corev1.NodeMemoryPressure, corev1.NodeDiskPressure, corev1.NodePIDPressure, corev1.NodeReady} {
		st := corev1.ConditionFalse
		if c == corev1.NodeReady {
			st = corev1.ConditionTrue
		}
		n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{Type: c, Status: st, LastHeartbeatTime: created, LastTransitionTime: created, Reason: "Kubelet" + string(c), Message: "kubelet reports " + string(c)})
	}
	for k := range 30 {
		n.Status.Images = append(n.Status.Images, corev1.ContainerImage{SizeBytes: int64(50+k) << 20,
			Names: []string{fmt.Sprintf("registry.example.com/team-%02d/service-%02d@sha256:%064x", k%7, k, uint64(k+1)*0x9e3779b97f4a7c15),
				fmt.Sprintf("registry.example.com/team-%02d/service-%02d:v1.%d", k%7, k, k)}})
	}
	return n
}

// fakePod is a Deployment's or Job's pod as the apiserver lists it,
// managedFields included; a reclaimed one as the pod webhook admitted it.
func fakePod(names reclaimable.Names, node string, i, j int, reclaimed bool, created metav1.Time) (*corev1.Pod, error) {
	rl := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("2Gi")}
	ns, app := "apps", fmt.Sprintf("svc-%03d", j)
	if reclaimed {
		rl = corev1.ResourceList{names.CPU: resource.MustParse("1000"), names.Memory: resource.MustParse("2Gi")}
		ns, app = "batch", fmt.Sprintf("job-%03d", j)
	}
	name := fmt.Sprintf("%s-7d9f8b6c5d-%05d%02d", app, i, j)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, UID: types.UID(fmt.Sprintf("6f1c2d9e-3b4a-4c5d-%04d-%012d", j, i)),
			ResourceVersion: "1000", CreationTimestamp: created, GenerateName: app + "-7d9f8b6c5d-",
			Labels:          map[string]string{"app.kubernetes.io/name": app, "app.kubernetes.io/part-of": "shop", "pod-template-hash": "7d9f8b6c5d"},
			Annotations:     map[string]string{"kubectl.kubernetes.io/default-container": "main"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: app + "-7d9f8b6c5d", UID: "0d1e2f3a-4b5c-6d7e-8f90-a1b2c3d4e5f6"}},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &created, FieldsType: "FieldsV1",
				FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app.kubernetes.io/name":{},"f:pod-template-hash":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"0d1e2f3a-4b5c-6d7e-8f90-a1b2c3d4e5f6\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"main\"}":{".":{},"f:image":{},"f:name":{},"f:resources":{".":{},"f:limits":{},"f:requests":{}}}}}}`)}}},
		},
		Spec: corev1.PodSpec{NodeName: node, ServiceAccountName: "default", RestartPolicy: corev1.RestartPolicyAlways,
			Containers: []corev1.Container{{Name: "main", Image: "registry.example.com/shop/" + app + ":2025.03.01",
				Args:         []string{"--listen=:8080", "--log-level=info"},
				Env:          []corev1.EnvVar{{Name: "GOMAXPROCS", Value: "1"}, {Name: "REGION", Value: "eu-west-1"}},
				Ports:        []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
				Resources:    corev1.ResourceRequirements{Requests: rl, Limits: rl},
				VolumeMounts: []corev1.VolumeMount{{Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(8080)}},
					PeriodSeconds: 10}}},
			Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}},
			Volumes: []corev1.Volume{{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}}}}}}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, HostIP: "10.20.0.1", PodIP: fmt.Sprintf("100.64.%d.%d", i%256, j), StartTime: &created,
			QOSClass: corev1.PodQOSGuaranteed,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: created},
				{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: created}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "main", Ready: true, RestartCount: 0, Image: "registry.example.com/shop/" + app + ":2025.03.01",
				ImageID: "registry.example.com/shop/" + app + "@sha256:0123456789abcdef", ContainerID: fmt.Sprintf("containerd://%064x", i*100+j),
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: created}}}}},
	}
	if reclaimed {
		if _, err := enforcement.Enforce(&pod.Spec, names); err != nil {
			return nil, fmt.Errorf("bench pod cannot be enforced: %w", err)
		}
	}
	return pod, nil
}

// start serves on a loopback port until stop.
func (f *fakeAPI) start(ctx context.Context) error {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	f.url = "http://" + ln.Addr().String()
	f.srv = &http.Server{Handler: http.HandlerFunc(f.serve), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = f.srv.Serve(ln) }()
	return nil
}

func (f *fakeAPI) stop() {
	if f.srv != nil {
		_ = f.srv.Close()
	}
}

func (f *fakeAPI) count(key string) {
	f.statsMu.Lock()
	f.requests[key]++
	f.statsMu.Unlock()
}

func (f *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Path
	watching := r.URL.Query().Get("watch") == "true"
	key := r.Method + " " + path
	if strings.HasPrefix(path, "/api/v1/nodes/") {
		key = r.Method + " /api/v1/nodes/*"
		if strings.HasSuffix(path, "/status") {
			key += "/status"
		}
	}
	if watching {
		key += "?watch"
	}
	f.count(key)
	wantProto := strings.Contains(r.Header.Get("Accept"), "protobuf")
	switch {
	case r.Method == http.MethodGet && (path == "/api/v1/nodes" || path == "/api/v1/pods") && watching:
		f.watch(w, r, path == "/api/v1/nodes", wantProto)
	case r.Method == http.MethodGet && path == "/api/v1/nodes":
		f.listNodes(w, r, wantProto)
	case r.Method == http.MethodGet && path == "/api/v1/pods":
		from, to, whole := page(r, len(f.pods.Items))
		switch {
		case whole && wantProto:
			write(w, "application/vnd.kubernetes.protobuf", f.podProto)
		case whole:
			write(w, "application/json", f.podJSON)
		default:
			list := &corev1.PodList{TypeMeta: f.pods.TypeMeta, ListMeta: metav1.ListMeta{ResourceVersion: f.pods.ResourceVersion, Continue: next(to, len(f.pods.Items))},
				Items: f.pods.Items[from:to]}
			encode(w, list, wantProto)
		}
	case r.Method == http.MethodPatch && strings.HasPrefix(path, "/api/v1/nodes/"):
		f.patchNode(w, r, strings.TrimPrefix(path, "/api/v1/nodes/"), wantProto)
	case r.Method == http.MethodGet && path == "/apis/metrics.k8s.io/v1beta1/nodes":
		n, _ := f.metrics(wantProto)
		write(w, contentType(wantProto), n)
	case r.Method == http.MethodGet && path == "/apis/metrics.k8s.io/v1beta1/pods":
		_, p := f.metrics(wantProto)
		write(w, contentType(wantProto), p)
	case r.Method == http.MethodPost && path == "/apis/authentication.k8s.io/v1/tokenreviews":
		// The roles' metrics servers review the benchmark's scrapes: any
		// token is the benchmark's.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"kind":"TokenReview","apiVersion":"authentication.k8s.io/v1","status":{"authenticated":true,"user":{"username":"bench"}}}`))
	case r.Method == http.MethodPost && path == "/apis/authorization.k8s.io/v1/subjectaccessreviews":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"kind":"SubjectAccessReview","apiVersion":"authorization.k8s.io/v1","status":{"allowed":true}}`))
	case strings.Contains(path, "/events"):
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = w.Write([]byte(`{"kind":"Event","apiVersion":"v1","metadata":{"name":"x","namespace":"default"}}`))
	default:
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"fake API: %s not served"}`, path)
	}
}

func write(w http.ResponseWriter, contentType string, b []byte) {
	w.Header().Set("Content-Type", contentType)
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	_, _ = w.Write(b)
}

func (f *fakeAPI) listNodes(w http.ResponseWriter, r *http.Request, wantProto bool) {
	f.mu.Lock()
	from, to, _ := page(r, len(f.order))
	list := &corev1.NodeList{TypeMeta: metav1.TypeMeta{Kind: "NodeList", APIVersion: "v1"},
		ListMeta: metav1.ListMeta{ResourceVersion: strconv.FormatInt(f.rv, 10), Continue: next(to, len(f.order))}}
	for _, name := range f.order[from:to] {
		list.Items = append(list.Items, *f.nodes[name])
	}
	f.mu.Unlock()
	encode(w, list, wantProto)
}

// page is the part [from, to) of n items a list request asks for: all of
// them without a limit or at resourceVersion "0" (whole), else limit items
// from the index its continue token carries.
func page(r *http.Request, n int) (from, to int, whole bool) {
	q := r.URL.Query()
	limit, _ := strconv.Atoi(q.Get("limit"))
	if limit <= 0 || (q.Get("resourceVersion") == "0" && q.Get("continue") == "") {
		return 0, n, true
	}
	from, _ = strconv.Atoi(q.Get("continue"))
	from = min(max(from, 0), n)
	return from, min(n, from+limit), false
}

// next is the continue token after an answer ending at to of n items.
func next(to, n int) string {
	if to >= n {
		return ""
	}
	return strconv.Itoa(to)
}

func contentType(proto bool) string {
	if proto {
		return "application/vnd.kubernetes.protobuf"
	}
	return "application/json"
}

func encode(w http.ResponseWriter, obj runtime.Object, wantProto bool) {
	b, err := marshal(obj, wantProto)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	write(w, contentType(wantProto), b)
}

// marshal encodes obj as kube-apiserver answers a get: protobuf (with its
// magic prefix) or JSON.
func marshal(obj runtime.Object, wantProto bool) ([]byte, error) {
	if !wantProto {
		return json.Marshal(obj)
	}
	var buf bytes.Buffer
	err := protoSerializer.Encode(obj, &buf)
	return buf.Bytes(), err
}

// watch holds the stream open; node watchers get every patched node, as
// kube-apiserver sends it: JSON lines, or length-delimited protobuf
// WatchEvents each holding the node encoded as in a get.
func (f *fakeAPI) watch(w http.ResponseWriter, r *http.Request, nodes, wantProto bool) {
	var enc streaming.Encoder
	if wantProto {
		w.Header().Set("Content-Type", "application/vnd.kubernetes.protobuf;stream=watch")
		enc = streaming.NewEncoder(protobuf.LengthDelimitedFramer.NewFrameWriter(w), rawProtoSerializer)
	} else {
		w.Header().Set("Content-Type", "application/json")
		enc = streaming.NewEncoder(kjson.Framer.NewFrameWriter(w), jsonSerializer)
	}
	w.WriteHeader(http.StatusOK)
	fl, _ := w.(http.Flusher)
	if fl != nil {
		fl.Flush()
	}
	if !nodes {
		<-r.Context().Done()
		return
	}
	ch := make(chan *corev1.Node, 20000)
	f.mu.Lock()
	f.watchers[ch] = struct{}{}
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.watchers, ch)
		f.mu.Unlock()
	}()
	for {
		select {
		case <-r.Context().Done():
			return
		case n := <-ch:
			obj, err := marshal(n, wantProto)
			if err != nil {
				return
			}
			ev := &metav1.WatchEvent{Type: string(watch.Modified), Object: runtime.RawExtension{Raw: obj}}
			if err := enc.Encode(ev); err != nil {
				return
			}
			if fl != nil {
				fl.Flush()
			}
		}
	}
}

func (f *fakeAPI) patchNode(w http.ResponseWriter, r *http.Request, rest string, wantProto bool) {
	name, sub, _ := strings.Cut(rest, "/")
	var patch struct {
		Metadata struct {
			Annotations map[string]*string `json:"annotations"`
		} `json:"metadata"`
		Status struct {
			Capacity    map[corev1.ResourceName]string `json:"capacity"`
			Allocatable map[corev1.ResourceName]string `json:"allocatable"`
		} `json:"status"`
	}
	if err := json.NewDecoder(r.Body).Decode(&patch); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	old, ok := f.nodes[name]
	if !ok {
		f.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"nodes %q not found"}`, name)
		return
	}
	n := old.DeepCopy()
	if sub == "status" {
		for k, v := range patch.Status.Capacity {
			n.Status.Capacity[k] = resource.MustParse(v)
		}
		for k, v := range patch.Status.Allocatable {
			n.Status.Allocatable[k] = resource.MustParse(v)
		}
	}
	// kube-apiserver keeps metadata changes made through nodes/status too;
	// the publisher sends its annotation that way.
	for k, v := range patch.Metadata.Annotations {
		if v == nil {
			delete(n.Annotations, k)
		} else {
			n.Annotations[k] = *v
		}
	}
	f.rv++
	n.ResourceVersion = strconv.FormatInt(f.rv, 10)
	f.nodes[name] = n
	for ch := range f.watchers {
		select {
		case ch <- n:
		default: // a watcher this far behind would be dropped by a real apiserver too
		}
	}
	f.mu.Unlock()
	encode(w, n, wantProto)
}

// metrics returns the metrics lists in JSON or protobuf, timestamped now
// (re-encoded at most every 10 s, like metrics-server's resolution).
func (f *fakeAPI) metrics(proto bool) (nodes, pods []byte) {
	f.metricsMu.Lock()
	defer f.metricsMu.Unlock()
	if time.Since(f.metricsAt) >= 10*time.Second {
		now := time.Now()
		ts := metav1.NewTime(now.UTC().Truncate(time.Second))
		for i := range f.nodeMetrics.Items {
			f.nodeMetrics.Items[i].Timestamp = ts
		}
		for i := range f.podMetrics.Items {
			f.podMetrics.Items[i].Timestamp = ts
		}
		var n, p [2][]byte
		var errs [4]error
		n[0], errs[0] = json.Marshal(f.nodeMetrics)
		p[0], errs[1] = json.Marshal(f.podMetrics)
		n[1], errs[2] = metricsProto(f.nodeMetrics)
		p[1], errs[3] = metricsProto(f.podMetrics)
		if errors.Join(errs[:]...) == nil {
			f.nodeMetricsBody, f.podMetricsBody, f.metricsAt = n, p, now
		}
	}
	i := 0
	if proto {
		i = 1
	}
	return f.nodeMetricsBody[i], f.podMetricsBody[i]
}

var metricsProtoSerializer = protobuf.NewSerializer(metricsscheme.Scheme, metricsscheme.Scheme)

func metricsProto(obj runtime.Object) ([]byte, error) {
	var b bytes.Buffer
	err := metricsProtoSerializer.Encode(obj, &b)
	return b.Bytes(), err
}

// requestCounts returns the requests served, by method and path.
func (f *fakeAPI) requestCounts() map[string]int {
	f.statsMu.Lock()
	defer f.statsMu.Unlock()
	out := make(map[string]int, len(f.requests))
	for k, v := range f.requests {
		out[k] = v
	}
	return out
}
