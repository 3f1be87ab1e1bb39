package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/kube-reclaim/kube-reclaim/internal/ociimage"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
	"github.com/kube-reclaim/kube-reclaim/test/images"
)

// Helpers of the failover and upgrade subtests of the install test.

const (
	installPublisherLease = "kube-reclaim-publisher"
	installSchedulerLease = installSchedName
	// podNameExtra is the user extra a service account token bound to a pod
	// carries: which replica made a request.
	podNameExtra = "authentication.kubernetes.io/pod-name"
)

// pendingBuild is a second build, imported into every node, made in the
// background while the install test waits for metrics and the kubelets'
// ConfigMap sync.
type pendingBuild struct {
	done     chan struct{}
	build    framework.InstallImage
	imported time.Duration
	err      error
}

func startInstallBuild(ctx context.Context, root, dir, tag string, plugin []ociimage.File, nodes map[string]*cluster.RealNode) *pendingBuild {
	p := &pendingBuild{done: make(chan struct{})}
	go func() {
		defer close(p.done)
		if p.build, p.err = framework.BuildInstallImage(ctx, root, dir, installImageRepo, tag, plugin); p.err != nil {
			return
		}
		start := time.Now()
		for _, rn := range nodes {
			if p.err = rn.ImportImages(ctx, p.build.Tarball); p.err != nil {
				return
			}
		}
		p.imported = time.Since(start)
	}()
	return p
}

// installPluginScheduler are the files of the kube-reclaim-scheduler the
// install images carry: the one test/cluster caches (`make tools` builds
// it), which spares the test a second build of kube-scheduler. It is built
// with cgo, so its interpreter and libraries go in too, as in the test's
// kube-scheduler image.
func installPluginScheduler(ctx context.Context) ([]ociimage.File, error) {
	bin, err := cluster.EnsurePluginScheduler(ctx, nil)
	if err != nil {
		return nil, err
	}
	return images.DynamicFiles(bin, ociimage.BinDir+"/"+filepath.Base(ociimage.PluginScheduler))
}

// writeInstallKustomization names tag and the shipped overlay (default or
// plugin-scheduler) in the user's own kustomization, as deploy/README.md
// ("Getting the image", "Upgrading", "Choosing the scheduler topology")
// tells users.
func writeInstallKustomization(dir, overlay, tag string) error {
	k := fmt.Sprintf("resources: [../deploy/%s]\nimages:\n  - name: %s\n    newName: %s\n    newTag: %s\n",
		overlay, ociimage.DefaultRepository, installImageRepo, tag)
	return os.WriteFile(filepath.Join(dir, "kustomization.yaml"), []byte(k), 0o644)
}

// holderPod is the pod of a leader-election identity: client-go's
// identities here are "<hostname>_<suffix>", and a pod's hostname is its
// name.
func holderPod(identity string) string {
	if i := strings.LastIndex(identity, "_"); i > 0 {
		return identity[:i]
	}
	return identity
}

func getLease(ctx context.Context, c *cluster.Cluster, name string) (*coordinationv1.Lease, string, error) {
	l, err := c.Client.CoordinationV1().Leases(installNamespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, "", err
	}
	holder := ""
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	return l, holder, nil
}

// waitNewHolder waits until the Lease is held by another pod than old and
// returns that pod and when it acquired the Lease.
func waitNewHolder(t *testing.T, c *cluster.Cluster, name, old string, timeout time.Duration) (string, time.Time) {
	t.Helper()
	var pod string
	var acquired time.Time
	if took, ok := framework.Poll(timeout, 50*time.Millisecond, func() bool {
		l, holder, err := getLease(context.Background(), c, name)
		if err != nil || holder == "" || holderPod(holder) == old {
			return false
		}
		pod = holderPod(holder)
		if l.Spec.AcquireTime != nil {
			acquired = l.Spec.AcquireTime.Time
		}
		return true
	}); !ok {
		t.Fatalf("Lease %s: no holder but %s after %s", name, old, took)
	}
	return pod, acquired
}

// auditFrom is the audit log of c from from on, as far as the apiserver has
// written it (it writes in batches: callers poll).
func auditFrom(t *testing.T, c *cluster.Cluster, from time.Time, keep func(*framework.AuditEvent) bool) []framework.AuditEvent {
	return framework.AuditEvents(t, c, from, time.Now().Add(time.Hour), keep)
}

func auditPod(e *framework.AuditEvent) string {
	if v := e.User.Extra[podNameExtra]; len(v) > 0 {
		return v[0]
	}
	return ""
}

// kubeletStatusWrites are the kubelets' status writes of the nodes from
// from on, by node, with those that passed one of configs' webhooks and
// those the API server let through when calling one failed
// (failurePolicy Ignore).
func kubeletStatusWrites(t *testing.T, c *cluster.Cluster, from time.Time, configs map[string]bool) (through, failedOpen map[string]int) {
	through, failedOpen = map[string]int{}, map[string]int{}
	for _, e := range auditFrom(t, c, from, func(e *framework.AuditEvent) bool {
		return e.ObjectRef.Resource == "nodes" && e.ObjectRef.Subresource == "status" &&
			e.User.Username == "system:node:"+e.ObjectRef.Name && e.ResponseStatus.Code < 300
	}) {
		if e.MutatedBy(configs) != "" {
			through[e.ObjectRef.Name]++
		}
		for k := range e.Annotations {
			if strings.HasPrefix(k, "failed-open.mutation.webhook.admission.k8s.io/") {
				failedOpen[e.ObjectRef.Name]++
			}
		}
	}
	return through, failedOpen
}

// installWebhooks are the webhooks of MutatingWebhookConfigurations that
// call a Service in the install namespace.
func installWebhooks(t *testing.T, c *cluster.Cluster) []installWebhook {
	l, err := c.Client.AdmissionregistrationV1().MutatingWebhookConfigurations().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []installWebhook
	for _, cfg := range l.Items {
		for _, w := range cfg.Webhooks {
			if s := w.ClientConfig.Service; s != nil && s.Namespace == installNamespace {
				out = append(out, installWebhook{config: cfg.Name, webhook: w.Name, service: s.Namespace + "/" + s.Name, caBundle: w.ClientConfig.CABundle})
			}
		}
	}
	return out
}

type installWebhook struct {
	config, webhook, service string
	caBundle                 []byte
}

// webhookConfigs are the names of the configurations installWebhooks finds.
func webhookConfigs(t *testing.T, c *cluster.Cluster) map[string]bool {
	out := map[string]bool{}
	for _, w := range installWebhooks(t, c) {
		out[w.config] = true
	}
	return out
}

// bindsBy counts the Bindings of reclaimed pods from from on by the pod
// that made them (the extender sidecar of a kube-reclaim-scheduler pod),
// with the earliest of each.
func bindsBy(t *testing.T, c *cluster.Cluster, from time.Time) (count map[string]int, first map[string]time.Time) {
	count, first = map[string]int{}, map[string]time.Time{}
	for _, e := range auditFrom(t, c, from, func(e *framework.AuditEvent) bool {
		return e.ObjectRef.Resource == "pods" && e.ObjectRef.Subresource == "binding" && e.ResponseStatus.Code < 300 &&
			e.User.Username == "system:serviceaccount:"+installNamespace+":"+installSchedName
	}) {
		p := auditPod(&e)
		count[p]++
		if f, ok := first[p]; !ok || e.StageTimestamp.Before(f) {
			first[p] = e.StageTimestamp
		}
	}
	return count, first
}

// rolePods are the pods of one role's Deployment.
func rolePods(t *testing.T, c *cluster.Cluster, component string) []corev1.Pod {
	l, err := c.Client.CoreV1().Pods(installNamespace).List(context.Background(), metav1.ListOptions{
		LabelSelector: "app.kubernetes.io/name=kube-reclaim,app.kubernetes.io/component=" + component})
	if err != nil {
		t.Fatal(err)
	}
	return l.Items
}

func podReady(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil || p.Status.Phase != corev1.PodRunning {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// kubeReclaimImages are the images of a pod's kube-reclaim containers, as
// its spec names them and as the kubelet reports them running.
func kubeReclaimImages(p *corev1.Pod) (spec, running []string) {
	for _, ct := range p.Spec.Containers {
		if strings.HasPrefix(ct.Image, installImageRepo+":") {
			spec = append(spec, ct.Image)
		}
	}
	for _, s := range p.Status.ContainerStatuses {
		if strings.HasPrefix(s.Image, installImageRepo+":") {
			running = append(running, s.Image)
		}
	}
	return spec, running
}

// rolledOut reports whether the Deployment of component runs image only:
// Available with every replica updated and no pod of an older template
// left, not even terminating.
func rolledOut(t *testing.T, c *cluster.Cluster, component, image string) bool {
	d, err := c.Client.AppsV1().Deployments(installNamespace).Get(context.Background(), "kube-reclaim-"+component, metav1.GetOptions{})
	if err != nil || !framework.DeploymentAvailable(d) || d.Status.Replicas != *d.Spec.Replicas {
		return false
	}
	pods := rolePods(t, c, component)
	if len(pods) != int(*d.Spec.Replicas) {
		return false
	}
	for i := range pods {
		spec, running := kubeReclaimImages(&pods[i])
		if !podReady(&pods[i]) || len(running) != len(spec) {
			return false
		}
		for _, img := range append(spec, running...) {
			if img != image {
				return false
			}
		}
	}
	return true
}

func deploymentImages(ds []appsv1.Deployment) string {
	var parts []string
	for _, d := range ds {
		for _, ct := range d.Spec.Template.Spec.Containers {
			parts = append(parts, d.Name+"/"+ct.Name+"="+ct.Image)
		}
	}
	return strings.Join(parts, " ")
}

// installBurstPod opts into reclaimed capacity by its label alone, as the
// Job of the install test does: the profile rewrites its native requests.
func installBurstPod(ns, name string, cpuMilli, memBytes int64) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{framework.Names.ReclaimedLabel: "true", "app": "install-burst"}},
		Spec: corev1.PodSpec{
			RestartPolicy:                 corev1.RestartPolicyNever,
			AutomountServiceAccountToken:  new(bool),
			TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{
				Name: "main", Image: cluster.WorkloadImage, ImagePullPolicy: corev1.PullNever,
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU:    *resource.NewMilliQuantity(cpuMilli, resource.DecimalSI),
					corev1.ResourceMemory: *resource.NewQuantity(memBytes, resource.BinarySI),
				}},
			}},
		},
	}
}

// burst creates reclaimed pods one every interval, up to n or until stopped.
// A creation refused (the pod webhook's failurePolicy is Fail, and a
// rollout replaces its replicas) is retried, as a controller would, and
// counted.
type burst struct {
	ns, prefix string
	stopc      chan struct{}
	done       chan struct{}
	mu         sync.Mutex
	created    int
	retried    []string
	err        error
}

func startBurst(c *cluster.Cluster, ns, prefix string, n int, interval time.Duration, cpuMilli, memBytes int64) *burst {
	b := &burst{ns: ns, prefix: prefix, stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(b.done)
		for i := 0; i < n; i++ {
			pod := installBurstPod(ns, fmt.Sprintf("%s-%02d", prefix, i), cpuMilli, memBytes)
			deadline := time.Now().Add(30 * time.Second)
			for {
				_, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{})
				if err == nil {
					break
				}
				b.mu.Lock()
				b.retried = append(b.retried, fmt.Sprintf("%s at %s: %v", pod.Name, time.Now().Format("15:04:05.000"), err))
				b.mu.Unlock()
				if time.Now().After(deadline) {
					b.mu.Lock()
					b.err = fmt.Errorf("creating %s: %w", pod.Name, err)
					b.mu.Unlock()
					return
				}
				time.Sleep(500 * time.Millisecond)
			}
			b.mu.Lock()
			b.created++
			b.mu.Unlock()
			select {
			case <-b.stopc:
				return
			case <-time.After(interval):
			}
		}
	}()
	return b
}

// stop ends the creations and returns how many pods were created, the
// refused attempts and the error that ended the burst early.
func (b *burst) stop() (int, []string, error) {
	select {
	case <-b.stopc:
	default:
		close(b.stopc)
	}
	<-b.done
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.created, b.retried, b.err
}

// burstCPU splits share of the room the nodes' fresh annotations offer,
// less reserve per node for the regular pods a failover or a rollout adds
// (they lower the room under the request policy), into n pods.
func burstCPU(t *testing.T, c *cluster.Cluster, n int, reserveMilli int64, share float64) (int64, string) {
	views, err := framework.Views(context.Background(), c, nil, reclaimable.DefaultStaleAfter)
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	var rooms []string
	for name, v := range views {
		r := v.Published()
		rooms = append(rooms, fmt.Sprintf("%s %dm", name, r.CPUMilli))
		total += max(0, r.CPUMilli-reserveMilli)
	}
	sort.Strings(rooms)
	per := int64(float64(total)*share) / int64(n)
	if per < 10 {
		t.Fatalf("the room (%s) leaves %dm per pod of a %d-pod burst, too little to fill it", strings.Join(rooms, ", "), per, n)
	}
	return per, strings.Join(rooms, ", ")
}

// expectOverflowPending is the positive control of a burst's placement: a
// reclaimed pod asking more CPU than any node's whole room stays Pending
// with the scheduler's reason, sampled throughout a window. Not the largest
// free room plus one: the publisher may raise a node's room between this
// look and the bind (a regular pod of an earlier subtest going away), and
// the scheduler rightly places the pod then.
func expectOverflowPending(t *testing.T, c *cluster.Cluster, ns string, mem int64) (ask, largest int64, refusal string) {
	t.Helper()
	views, err := framework.Views(context.Background(), c, nil, reclaimable.DefaultStaleAfter)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range views {
		largest = max(largest, v.Published().CPUMilli)
	}
	ask = largest + 1
	framework.CreatePod(t, c, installBurstPod(ns, "overflow", ask, mem))
	framework.ExpectAbsence(t, framework.Absence{
		Window: 5 * time.Second, Every: time.Second, ControlWithin: 30 * time.Second,
		Look: func(time.Duration) ([]string, bool) {
			var v []string
			if node, bound := framework.MustPods(t, c, ns).BoundTo["overflow"]; bound {
				v = append(v, fmt.Sprintf("a pod asking %dm, more than any node's whole room, was bound to %s", ask, node))
			}
			refusal = framework.SchedulingMessage(c, ns, "overflow")
			return v, refusal != ""
		},
	})
	framework.DeletePod(t, c, ns, "overflow")
	return ask, largest, refusal
}

// nodeVersion is one stored version of a node, as a watch delivered it.
type nodeVersion struct {
	at       time.Time
	baseline bool // the version stored when the observation started
	view     framework.NodeView
}

// leaseVersion is one stored version of a Lease of the install namespace.
type leaseVersion struct {
	at              time.Time
	name, holder    string
	durationSeconds int32
	renew           time.Time
}

// installObserver records what the failover and upgrade subtests judge, from
// start to stop: every stored version of every node (a watch: no write
// between two looks escapes), every version of the roles' Leases, and looks
// at the nodes and the reclaimed pods together every interval. A look counts
// a node without the reclaimed keys, with values that are not what its
// annotation stands for (max(room, held)), with zero values, or whose bound
// reclaimed pods ask more than its reclaimed allocatable (over-booked).
type installObserver struct {
	c        *cluster.Cluster
	every    time.Duration
	start    time.Time
	cancel   context.CancelFunc
	wg       sync.WaitGroup
	mu       sync.Mutex
	versions map[string][]nodeVersion
	leases   []leaseVersion
	obs      observation
	// lastLook is when the last completed look began.
	lastLook time.Time
}

// observation is what an installObserver saw.
type observation struct {
	window                                                        time.Duration
	every, maxGap                                                 time.Duration
	looks, nodeLooks, withoutKeys, notAnnotated, zero, overbooked int
	// peakFill is the largest share of a node's reclaimed allocatable CPU
	// that bound reclaimed pods asked at a look.
	peakFill float64
	// writes and kubeletWrites count the stored versions of each node after
	// the start, and those a kubelet status write made (the Ready
	// heartbeat moved); dropped those without the values the annotation
	// stands for.
	writes, kubeletWrites map[string]int
	dropped               int
	violations            []string
	errs                  []string
	leases                []leaseVersion
	versions              map[string][]nodeVersion
}

func startInstallObserver(t *testing.T, c *cluster.Cluster, every time.Duration) *installObserver {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	o := &installObserver{c: c, every: every, start: time.Now(), cancel: cancel, versions: map[string][]nodeVersion{},
		obs: observation{every: every, writes: map[string]int{}, kubeletWrites: map[string]int{}}}
	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range nodes.Items {
		o.record(&nodes.Items[i], o.start, true)
	}
	o.watch(ctx, t, nodes.ResourceVersion, func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		return c.Client.CoreV1().Nodes().Watch(ctx, opts)
	}, func(obj any, at time.Time) {
		if n, ok := obj.(*corev1.Node); ok {
			o.record(n, at, false)
		}
	})
	leases, err := c.Client.CoordinationV1().Leases(installNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range leases.Items {
		o.recordLease(&leases.Items[i], o.start)
	}
	o.watch(ctx, t, leases.ResourceVersion, func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
		return c.Client.CoordinationV1().Leases(installNamespace).Watch(ctx, opts)
	}, func(obj any, at time.Time) {
		if l, ok := obj.(*coordinationv1.Lease); ok {
			o.recordLease(l, at)
		}
	})
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		last := time.Now()
		for {
			o.look(ctx)
			now := time.Now()
			o.mu.Lock()
			o.obs.maxGap = max(o.obs.maxGap, now.Sub(last))
			o.mu.Unlock()
			last = now
			select {
			case <-ctx.Done():
				return
			case <-time.After(every):
			}
		}
	}()
	return o
}

// watch delivers every object of a watch from rv on, resuming where it
// broke off.
func (o *installObserver) watch(ctx context.Context, t *testing.T, rv string, w func(context.Context, metav1.ListOptions) (watch.Interface, error), deliver func(any, time.Time)) {
	t.Helper()
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, rv, &cache.ListWatch{WatchFuncWithContext: w})
	if err != nil {
		t.Fatal(err)
	}
	o.wg.Add(1)
	go func() {
		defer o.wg.Done()
		defer rw.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-rw.ResultChan():
				if !ok {
					return
				}
				switch ev.Type {
				case watch.Added, watch.Modified:
					deliver(ev.Object, time.Now())
				case watch.Error:
					o.mu.Lock()
					o.obs.errs = append(o.obs.errs, fmt.Sprintf("watch error: %v", ev.Object))
					o.mu.Unlock()
				}
			}
		}
	}()
}

func (o *installObserver) record(n *corev1.Node, at time.Time, baseline bool) {
	v := nodeVersion{at: at, baseline: baseline, view: framework.ViewOf(n, at, reclaimable.DefaultStaleAfter)}
	o.mu.Lock()
	defer o.mu.Unlock()
	prev := o.versions[n.Name]
	o.versions[n.Name] = append(prev, v)
	if baseline {
		return
	}
	o.obs.writes[n.Name]++
	if len(prev) > 0 && v.view.Heartbeat.After(prev[len(prev)-1].view.Heartbeat) {
		o.obs.kubeletWrites[n.Name]++
	}
	if why := valuesProblem(v.view); why != "" {
		o.obs.dropped++
		o.obs.violations = append(o.obs.violations, fmt.Sprintf("[%5.1fs] node %s version %s: %s", at.Sub(o.start).Seconds(), n.Name, n.ResourceVersion, why))
	}
}

func (o *installObserver) recordLease(l *coordinationv1.Lease, at time.Time) {
	v := leaseVersion{at: at, name: l.Name}
	if l.Spec.HolderIdentity != nil {
		v.holder = *l.Spec.HolderIdentity
	}
	if l.Spec.LeaseDurationSeconds != nil {
		v.durationSeconds = *l.Spec.LeaseDurationSeconds
	}
	if l.Spec.RenewTime != nil {
		v.renew = l.Spec.RenewTime.Time
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.leases = append(o.leases, v)
}

// valuesProblem says what is wrong with a node's reclaimed values: absent,
// or not max(room, held) of the annotation carried by the same version (""
// when nothing is). Zero is not wrong when the annotation says so.
func valuesProblem(v framework.NodeView) string {
	switch {
	case !v.HasStatus:
		return fmt.Sprintf("no reclaimed keys in status (capacity %+v, allocatable %+v)", v.Capacity, v.Allocatable)
	case !v.StatusMatchesAnnotation():
		want := reclaimable.Resources{}
		if v.Ann != nil {
			want = v.Ann.Room().Max(v.Ann.HeldOrZero())
		}
		return fmt.Sprintf("status capacity %+v allocatable %+v, the annotation stands for %+v", v.Capacity, v.Allocatable, want)
	}
	return ""
}

// lookFailed fails the observation, unless the look was cut short by the
// observer's own stop: a look the window's end interrupts found nothing.
func (o *installObserver) lookFailed(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	o.fail("look: " + err.Error())
}

func (o *installObserver) look(ctx context.Context) {
	began := time.Now()
	pods, err := framework.Pods(ctx, o.c, metav1.NamespaceAll)
	if err != nil {
		o.lookFailed(ctx, err)
		return
	}
	views, err := framework.Views(ctx, o.c, nil, reclaimable.DefaultStaleAfter)
	if err != nil {
		o.lookFailed(ctx, err)
		return
	}
	elapsed := time.Since(o.start)
	o.mu.Lock()
	defer o.mu.Unlock()
	o.obs.looks++
	o.lastLook = began
	for name, v := range views {
		o.obs.nodeLooks++
		switch why := valuesProblem(v); {
		case !v.HasStatus:
			o.obs.withoutKeys++
			o.violation(elapsed, name, why)
		case why != "":
			o.obs.notAnnotated++
			o.violation(elapsed, name, why)
		case v.Allocatable.CPUMilli == 0 || v.Allocatable.MemoryBytes == 0:
			o.obs.zero++
		}
		b := pods.Bookings[name]
		if b.CPUMilli > v.Allocatable.CPUMilli || b.MemoryBytes > v.Allocatable.MemoryBytes {
			o.obs.overbooked++
			o.violation(elapsed, name, fmt.Sprintf("over-booked: bound reclaimed pods ask %+v, reclaimed allocatable %+v", b, v.Allocatable))
		}
		if v.Allocatable.CPUMilli > 0 {
			o.obs.peakFill = max(o.obs.peakFill, float64(b.CPUMilli)/float64(v.Allocatable.CPUMilli))
		}
	}
}

func (o *installObserver) violation(elapsed time.Duration, node, why string) {
	o.obs.violations = append(o.obs.violations, fmt.Sprintf("[%5.1fs] look at node %s: %s", elapsed.Seconds(), node, why))
}

func (o *installObserver) fail(s string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.obs.errs = append(o.obs.errs, s)
}

// stop waits until the watch has delivered the version of every node
// stored now and a look has begun after now, ends the observation and
// returns it.
func (o *installObserver) stop(t *testing.T) observation {
	t.Helper()
	nodes, err := o.c.Client.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := framework.Poll(30*time.Second, 100*time.Millisecond, func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		for _, n := range nodes.Items {
			want, _ := strconv.ParseInt(n.ResourceVersion, 10, 64)
			vs := o.versions[n.Name]
			if len(vs) == 0 {
				return false
			}
			if got, _ := strconv.ParseInt(vs[len(vs)-1].view.Node.ResourceVersion, 10, 64); got < want {
				return false
			}
		}
		return true
	}); !ok {
		o.fail("the node watch did not deliver the versions stored at the end within 30s")
	}
	// A look begun after the end, so that a window shorter than a look's
	// interval (a fast failover) is looked at on both sides too.
	end := time.Now()
	if _, ok := framework.Poll(max(4*o.every, 10*time.Second), 50*time.Millisecond, func() bool {
		o.mu.Lock()
		defer o.mu.Unlock()
		return o.lastLook.After(end)
	}); !ok {
		o.fail("no look begun after the end of the window")
	}
	o.cancel()
	o.wg.Wait()
	o.mu.Lock()
	defer o.mu.Unlock()
	obs := o.obs
	obs.window = time.Since(o.start)
	obs.leases = o.leases
	obs.versions = o.versions
	return obs
}

func (r observation) String() string {
	var kubelet []string
	for n, k := range r.kubeletWrites {
		kubelet = append(kubelet, fmt.Sprintf("%s %d", n, k))
	}
	sort.Strings(kubelet)
	writes := 0
	for _, w := range r.writes {
		writes += w
	}
	return fmt.Sprintf("%d looks over %s (every %s, longest gap %s), %d node looks: %d without the reclaimed keys, %d with zero values (as published), "+
		"%d with values not the annotation's, %d over-booked (peak fill %.0f%% of a node's reclaimed CPU); "+
		"%d node versions stored, kubelet status writes %s, %d versions dropping the values",
		r.looks, r.window.Round(100*time.Millisecond), r.every, r.maxGap.Round(time.Millisecond), r.nodeLooks, r.withoutKeys, r.zero,
		r.notAnnotated, r.overbooked, 100*r.peakFill, writes, strings.Join(kubelet, ", "), r.dropped)
}

// check fails t with every violation; kubeletWritesPerNode is the positive
// control: status writes did happen during the window, on every node.
func (r observation) check(t *testing.T, kubeletWritesPerNode int) {
	t.Helper()
	for i, v := range r.violations {
		if i == 20 {
			t.Errorf("... %d more", len(r.violations)-i)
			break
		}
		t.Error(v)
	}
	for _, e := range r.errs {
		t.Error(e)
	}
	// A look is two API lists, which take up to a couple of seconds while
	// a burst starts its pods on this 2-core machine; the node watch has
	// every version in between.
	if r.looks < 2 || r.maxGap > max(2*r.every, 3*time.Second) {
		t.Errorf("%d looks, longest gap %s: the window was not observed throughout", r.looks, r.maxGap)
	}
	for n := range r.versions {
		if r.kubeletWrites[n] < kubeletWritesPerNode {
			t.Errorf("positive control: node %s saw %d kubelet status writes in %s, want at least %d", n, r.kubeletWrites[n], r.window.Round(time.Second), kubeletWritesPerNode)
		}
	}
}

// leaseHistory describes the versions of one Lease: holder, duration,
// when seen.
func (r observation) leaseHistory(name string, since time.Time) string {
	var parts []string
	prev := ""
	for _, l := range r.leases {
		if l.name != name || l.at.Before(since) {
			continue
		}
		h := holderPod(l.holder)
		if h == "" {
			h = "(released)"
		}
		if h == prev {
			continue
		}
		prev = h
		parts = append(parts, fmt.Sprintf("+%.1fs %s (%ds)", l.at.Sub(since).Seconds(), h, l.durationSeconds))
	}
	return strings.Join(parts, " -> ")
}

// kubectlRun runs the real kubectl against c and fails t on an error.
func kubectlRun(t *testing.T, c *cluster.Cluster, kubectl string, args ...string) string {
	t.Helper()
	out, err := exec.CommandContext(context.Background(), kubectl, append([]string{"--kubeconfig", c.Kubeconfig()}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// publisherWrites are the publisher's writes of nodes from from on, by
// the pod that made them.
func publisherWrites(t *testing.T, c *cluster.Cluster, from time.Time) []framework.AuditEvent {
	return auditFrom(t, c, from, func(e *framework.AuditEvent) bool {
		return e.ObjectRef.Resource == "nodes" && e.ResponseStatus.Code < 300 &&
			e.User.Username == "system:serviceaccount:"+installNamespace+":kube-reclaim-publisher"
	})
}

// testInstallPublisherFailover deletes the pod that holds the publisher's
// Lease. The other replica takes the Lease and publishes: its first write
// of a node annotation is timed from the delete. A node's room must change
// for anything to be published (the gate keeps a fresh annotation that
// still holds), so once the old leader has let go of the Lease (it stops
// its cycles before) a regular pod asking 300m is bound to one node, which
// lowers that node's room under the request policy by more than the
// decrease threshold. Every stored node version is checked throughout: the
// handover must not make a status write drop the values.
func testInstallPublisherFailover(t *testing.T, c *cluster.Cluster, annotated time.Time) {
	if annotated.IsZero() {
		t.Skip("no node annotated")
	}
	ctx := context.Background()
	_, identity, err := getLease(ctx, c, installPublisherLease)
	if err != nil || identity == "" {
		t.Fatalf("publisher Lease: holder %q, %v", identity, err)
	}
	leader := holderPod(identity)
	views, err := framework.Views(ctx, c, nil, reclaimable.DefaultStaleAfter)
	if err != nil {
		t.Fatal(err)
	}
	target, before := "", reclaimable.Resources{}
	for name, v := range views {
		if target == "" || v.Published().CPUMilli > before.CPUMilli {
			target, before = name, v.Published()
		}
	}
	ob := startInstallObserver(t, c, 500*time.Millisecond)
	defer ob.cancel()
	deleted := time.Now()
	if err := c.Client.CoreV1().Pods(installNamespace).Delete(ctx, leader, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if took, ok := framework.Poll(30*time.Second, 50*time.Millisecond, func() bool {
		_, h, err := getLease(ctx, c, installPublisherLease)
		return err == nil && h != identity
	}); !ok {
		t.Fatalf("the deleted leader %s did not let go of the Lease within %s", leader, took)
	}
	released := time.Now()
	regular := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "install-failover-regular"},
		Spec: corev1.PodSpec{
			NodeName: target, AutomountServiceAccountToken: new(bool), TerminationGracePeriodSeconds: new(int64),
			Containers: []corev1.Container{{Name: "main", Image: cluster.WorkloadImage, ImagePullPolicy: corev1.PullNever,
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("300m"), corev1.ResourceMemory: resource.MustParse("32Mi")}}}},
		},
	}
	if _, err := c.Client.CoreV1().Pods("default").Create(ctx, regular, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	defer framework.DeletePod(t, c, "default", regular.Name)
	newLeader, acquired := waitNewHolder(t, c, installPublisherLease, leader, 30*time.Second)
	var first *framework.AuditEvent
	if took, ok := framework.Poll(45*time.Second, 500*time.Millisecond, func() bool {
		for _, e := range publisherWrites(t, c, deleted) {
			if auditPod(&e) == newLeader && (first == nil || e.StageTimestamp.Before(first.StageTimestamp)) {
				first = &e
			}
		}
		return first != nil
	}); !ok {
		t.Fatalf("the new leader %s wrote no node within %s of the delete\nLease: %s", newLeader, took, ob.stop(t).leaseHistory(installPublisherLease, deleted))
	}
	// The write carried a new annotation of the node whose room fell.
	after := framework.View(t, c, target, reclaimable.DefaultStaleAfter)
	if took, ok := framework.Poll(30*time.Second, 500*time.Millisecond, func() bool {
		after = framework.View(t, c, target, reclaimable.DefaultStaleAfter)
		return after.Ann != nil && !after.Ann.WriteTime.Before(acquired.Truncate(time.Second)) && after.Published().CPUMilli < before.CPUMilli
	}); !ok {
		t.Errorf("node %s: no annotation written by the new leader with less than %dm within %s (annotation %s)", target, before.CPUMilli, took, after.Raw)
	}
	obs := ob.stop(t)
	obs.check(t, 0)
	// The first stored version of any node with a new annotation written
	// since the new leader took the Lease: what readers first see of it.
	var seen time.Time
	seenOn := ""
	for name, vs := range obs.versions {
		for i := 1; i < len(vs); i++ {
			v := vs[i]
			if v.view.Ann != nil && v.view.Raw != vs[i-1].view.Raw && !v.view.Ann.WriteTime.Before(acquired.Truncate(time.Second)) &&
				(seen.IsZero() || v.at.Before(seen)) {
				seen, seenOn = v.at, name
			}
		}
	}
	if seen.IsZero() {
		t.Fatalf("no stored node version carries an annotation the new leader wrote (writes by it: first %s %s)", first.Verb, first.ObjectRef.Name)
	}
	window := seen.Sub(deleted)
	t.Logf("publisher failover: leader %s deleted; Lease let go %s later, taken by %s %s after the delete; its first node write (%s %s) %s after the delete, the first annotation it wrote (node %s) stored %s after the delete (lease duration 15s); node %s room %dm -> %dm, annotation written %s",
		leader, released.Sub(deleted).Round(time.Millisecond), newLeader, acquired.Sub(deleted).Round(time.Millisecond), first.Verb, first.ObjectRef.Name,
		first.StageTimestamp.Sub(deleted).Round(time.Millisecond), seenOn, window.Round(time.Millisecond), target, before.CPUMilli, after.Published().CPUMilli, annotationWritten(after))
	t.Logf("publisher failover: Lease %s; %s", obs.leaseHistory(installPublisherLease, deleted), obs)
	if window > 15*time.Second {
		t.Errorf("the other replica first published %s after the delete, not within the 15s lease", window.Round(time.Millisecond))
	}
}

// testInstallWebhookFailover deletes one of the two webhook pods and looks
// at every node every half second, and at every stored node version, until
// each kubelet has written its status through a kube-reclaim webhook after
// the deleted pod is gone: the values stay at every look and in every
// version. Positive control: kubelet status writes happen in the window and
// pass the webhook.
func testInstallWebhookFailover(t *testing.T, c *cluster.Cluster, annotated time.Time) {
	if annotated.IsZero() {
		t.Skip("no node annotated")
	}
	ctx := context.Background()
	configs := webhookConfigs(t, c)
	var victim string
	for _, p := range rolePods(t, c, "webhook") {
		if podReady(&p) {
			victim = p.Name
			break
		}
	}
	if victim == "" {
		t.Fatal("no ready webhook pod")
	}
	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ob := startInstallObserver(t, c, 500*time.Millisecond)
	defer ob.cancel()
	deleted := time.Now()
	if err := c.Client.CoreV1().Pods(installNamespace).Delete(ctx, victim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	var gone time.Time
	var through map[string]int
	took, ok := framework.Poll(2*time.Minute, time.Second, func() bool {
		if gone.IsZero() {
			if _, err := c.Client.CoreV1().Pods(installNamespace).Get(ctx, victim, metav1.GetOptions{}); err == nil {
				return false
			}
			gone = time.Now()
		}
		through, _ = kubeletStatusWrites(t, c, gone, configs)
		for _, n := range nodes.Items {
			if through[n.Name] == 0 {
				return false
			}
		}
		return true
	})
	obs := ob.stop(t)
	if !ok {
		t.Errorf("not every kubelet wrote its status through the remaining webhook within %s of the delete (gone after %s): %v", took, gone.Sub(deleted), through)
	}
	obs.check(t, 1)
	all, failedOpen := kubeletStatusWrites(t, c, deleted, configs)
	t.Logf("webhook failover: pod %s deleted, gone %s later; kubelet status writes since the delete through a kube-reclaim webhook %v (after it was gone %v), let through unmutated because the call failed %v; %s",
		victim, gone.Sub(deleted).Round(time.Millisecond), all, through, failedOpen, obs)
}

// testInstallSchedulerFailover deletes the pod that leads
// kube-reclaim-scheduler once a third of a burst of reclaimed pods is
// bound. The standby's kube-scheduler takes the Lease and its own extender
// places the rest; every half second a look compares each node's bound
// reclaimed requests with its reclaimed allocatable. The burst takes 70 % of
// the room left after what the failover's new pod takes; positive control:
// a pod that fits the largest room but not what is left of it beside the
// burst stays Pending under the new leader.
func testInstallSchedulerFailover(t *testing.T, c *cluster.Cluster, annotated time.Time) {
	if annotated.IsZero() {
		t.Skip("no node annotated")
	}
	ctx := context.Background()
	const (
		n   = 16
		mem = 32 << 20
		ns  = "install-failover"
	)
	_, identity, err := getLease(ctx, c, installSchedulerLease)
	if err != nil || identity == "" {
		t.Fatalf("scheduler Lease: holder %q, %v", identity, err)
	}
	leader := holderPod(identity)
	cpu, rooms := burstCPU(t, c, n, 300, 0.7)
	framework.CreateNamespace(t, c, ns)
	defer framework.DeleteAllPods(t, c, ns)
	ob := startInstallObserver(t, c, 500*time.Millisecond)
	defer ob.cancel()
	started := time.Now()
	b := startBurst(c, ns, "burst", n, 150*time.Millisecond, cpu, mem)
	defer func() { _, _, _ = b.stop() }()
	if took, ok := framework.Poll(time.Minute, 100*time.Millisecond, func() bool {
		return len(framework.MustPods(t, c, ns).BoundTo) >= n/3
	}); !ok {
		t.Fatalf("the leader placed less than a third of the burst within %s", took)
	}
	boundBefore := len(framework.MustPods(t, c, ns).BoundTo)
	deleted := time.Now()
	if err := c.Client.CoreV1().Pods(installNamespace).Delete(ctx, leader, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	newLeader, acquired := waitNewHolder(t, c, installSchedulerLease, leader, time.Minute)
	took, ok := framework.Poll(3*time.Minute, 250*time.Millisecond, func() bool {
		return len(framework.MustPods(t, c, ns).BoundTo) == n
	})
	created, retried, berr := b.stop()
	if berr != nil || !ok {
		t.Fatalf("burst: %d of %d created (%v), %d bound %s after the delete; refused creations %v", created, n, berr,
			len(framework.MustPods(t, c, ns).BoundTo), took, retried)
	}
	placed := time.Since(deleted)

	ask, largest, refusal := expectOverflowPending(t, c, ns, mem)

	obs := ob.stop(t)
	obs.check(t, 0)
	var counts map[string]int
	var firstBind map[string]time.Time
	framework.Poll(10*time.Second, 500*time.Millisecond, func() bool {
		counts, firstBind = bindsBy(t, c, started)
		total := 0
		for _, k := range counts {
			total += k
		}
		return total >= n
	})
	if counts[newLeader] == 0 {
		t.Errorf("the new leader %s bound none of the burst (binds by pod %v): the rest was not placed through its extender", newLeader, counts)
	}
	t.Logf("scheduler failover: %d pods of %dm/32Mi (room %s); leader %s deleted with %d bound; Lease taken by %s %s after the delete, whose extender bound its first pod %s after the delete; all %d bound %s after the delete; binds by pod %v; refused creations %d",
		n, cpu, rooms, leader, boundBefore, newLeader, acquired.Sub(deleted).Round(time.Millisecond),
		firstBind[newLeader].Sub(deleted).Round(time.Millisecond), n, placed.Round(time.Millisecond), counts, len(retried))
	t.Logf("scheduler failover: positive control: a pod asking %dm (largest room %dm) stayed Pending: %s", ask, largest, refusal)
	t.Logf("scheduler failover: %s", obs)
}

// installUpgrade is what the upgrade subtest needs of the install test.
type installUpgrade struct {
	annotated     time.Time
	first         framework.InstallImage
	pending       *pendingBuild
	kustomization string
	overlay       string // the user's copy of deploy/, which the kustomization lists
	kubectl       string
	nodes         map[string]*cluster.RealNode
}

// testInstallUpgrade applies the overlay again with a second build under
// another version, the way deploy/README.md ("Upgrading") says, while
// kubelets post their status and a burst of reclaimed pods arrives. The
// publisher's rollout is held (kubectl rollout pause) until the new webhook
// and extender have run against annotations only the old publisher wrote,
// the skew docs/design.md ("Version skew") allows: the new extender places
// pods on their room, the new webhook keeps kubelets' status writes at it.
// Then the publisher rolls out too. Throughout, every look and every
// stored node version keeps the values, and no look finds a node
// over-booked.
func testInstallUpgrade(t *testing.T, c *cluster.Cluster, u installUpgrade) {
	if u.annotated.IsZero() {
		t.Skip("no node annotated")
	}
	ctx := context.Background()
	select {
	case <-u.pending.done:
	case <-time.After(10 * time.Minute):
		t.Fatal("the second build is not done after 10 minutes")
	}
	if u.pending.err != nil {
		t.Fatal(u.pending.err)
	}
	second := u.pending.build
	t.Logf("second build %s in %s and imported into %d nodes in %s, in the background: the binary says %q (first: %q)",
		second.Tag, second.Took.Round(time.Millisecond), len(u.nodes), u.pending.imported.Round(time.Millisecond), second.Version, u.first.Version)
	if second.Version == u.first.Version {
		t.Errorf("both builds report version %q", second.Version)
	}
	oldImage, newImage := installImageRepo+":"+u.first.Tag, installImageRepo+":"+second.Tag
	configs := webhookConfigs(t, c)
	const (
		n   = 30
		mem = 32 << 20
		ns  = "install-upgrade"
	)
	// Each rollout adds a pod per role before it removes an old one, and
	// their requests lower the room: keep 400m of each node's room out.
	cpu, rooms := burstCPU(t, c, n, 400, 0.7)
	framework.CreateNamespace(t, c, ns)
	defer framework.DeleteAllPods(t, c, ns)

	// The policy in force was edited in the live ConfigMap; apply puts back
	// the overlay's file, so it goes into the copy first, as
	// deploy/README.md ("Upgrading") tells users.
	cm, err := c.Client.CoreV1().ConfigMaps(installNamespace).Get(ctx, "kube-reclaim-policy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	policy := cm.Data["policy.yaml"]
	if err := os.WriteFile(filepath.Join(u.overlay, "base", "common", "policy.yaml"), []byte(policy), 0o644); err != nil {
		t.Fatal(err)
	}

	ob := startInstallObserver(t, c, 500*time.Millisecond)
	defer ob.cancel()
	kubectlRun(t, c, u.kubectl, "-n", installNamespace, "rollout", "pause", "deployment/kube-reclaim-publisher")
	if err := writeInstallKustomization(u.kustomization, "default", second.Tag); err != nil {
		t.Fatal(err)
	}
	b := startBurst(c, ns, "upgrade", n, 2*time.Second, cpu, mem)
	defer func() { _, _, _ = b.stop() }()
	applied := time.Now()
	var changed []string
	for _, line := range strings.Split(kubectlRun(t, c, u.kubectl, "apply", "-k", u.kustomization), "\n") {
		if !strings.HasSuffix(line, " unchanged") {
			changed = append(changed, line)
		}
	}
	t.Logf("kubectl apply -k with %s: %s (the rest unchanged)", second.Tag, strings.Join(changed, ", "))

	// The readers: every webhook and scheduler pod of the new build, the
	// old ones gone, the scheduler Lease held by a new pod.
	newSchedulers := map[string]bool{}
	if took, ok := framework.Poll(3*time.Minute, 500*time.Millisecond, func() bool {
		if !rolledOut(t, c, "webhook", newImage) || !rolledOut(t, c, "scheduler", newImage) {
			return false
		}
		for _, p := range rolePods(t, c, "scheduler") {
			newSchedulers[p.Name] = true
		}
		_, h, err := getLease(ctx, c, installSchedulerLease)
		return err == nil && newSchedulers[holderPod(h)]
	}); !ok {
		l, _ := c.Client.AppsV1().Deployments(installNamespace).List(ctx, metav1.ListOptions{})
		t.Fatalf("webhook and scheduler not rolled out to %s within %s: %s\n%s", newImage, took, deploymentSummary(l.Items), deploymentImages(l.Items))
	}
	readers := time.Now()
	for _, p := range rolePods(t, c, "publisher") {
		if spec, _ := kubeReclaimImages(&p); len(spec) != 1 || spec[0] != oldImage {
			t.Fatalf("publisher pod %s runs %v while its rollout is paused, want %s", p.Name, spec, oldImage)
		}
	}

	// New readers, old writer: hold until the new extender has placed pods
	// on the room of the old publisher's annotations and every kubelet has
	// written its status through the new webhook.
	var e1 int
	var e2 map[string]int
	took, ok := framework.Poll(2*time.Minute, time.Second, func() bool {
		counts, _ := bindsBy(t, c, readers)
		e1 = 0
		for p, k := range counts {
			if newSchedulers[p] {
				e1 += k
			}
		}
		e2, _ = kubeletStatusWrites(t, c, readers, configs)
		for name := range u.nodes {
			if e2[name] == 0 {
				return false
			}
		}
		return e1 >= 2
	})
	if !ok {
		t.Errorf("new readers and the old publisher for %s: the new extender bound %d pods, kubelet status writes through the new webhook %v", took, e1, e2)
	}
	views, err := framework.Views(ctx, c, nil, reclaimable.DefaultStaleAfter)
	if err != nil {
		t.Fatal(err)
	}
	var oldAnnotations []string
	for name, v := range views {
		if v.Ann == nil || !v.Fresh.Fresh {
			t.Errorf("node %s: annotation %q not fresh (%s)", name, v.Raw, v.Fresh.Detail)
			continue
		}
		oldAnnotations = append(oldAnnotations, fmt.Sprintf("%s room %dm held %dm written %s, status %dm",
			name, v.Ann.CPUMilli, v.Ann.HeldOrZero().CPUMilli, v.Ann.WriteTime.Format("15:04:05"), v.Allocatable.CPUMilli))
	}
	sort.Strings(oldAnnotations)
	held := time.Now()

	kubectlRun(t, c, u.kubectl, "-n", installNamespace, "rollout", "resume", "deployment/kube-reclaim-publisher")
	newPublishers := map[string]bool{}
	if took, ok := framework.Poll(3*time.Minute, 500*time.Millisecond, func() bool {
		if !rolledOut(t, c, "publisher", newImage) {
			return false
		}
		for _, p := range rolePods(t, c, "publisher") {
			newPublishers[p.Name] = true
		}
		_, h, err := getLease(ctx, c, installPublisherLease)
		return err == nil && newPublishers[holderPod(h)]
	}); !ok {
		t.Fatalf("publisher not rolled out to %s within %s: %v", newImage, took, rolePods(t, c, "publisher"))
	}
	done := time.Now()
	created, retried, berr := b.stop()
	if berr != nil {
		t.Error(berr)
	}
	if took, ok := framework.Poll(2*time.Minute, 500*time.Millisecond, func() bool {
		return len(framework.MustPods(t, c, ns).BoundTo) == created
	}); !ok {
		st := framework.MustPods(t, c, ns)
		msg := ""
		if len(st.Pending) > 0 {
			msg = framework.SchedulingMessage(c, ns, st.Pending[0])
		}
		t.Errorf("%d of %d burst pods bound %s after the rollout (pending %v: %s)", len(st.BoundTo), created, took, st.Pending, msg)
	}
	if cm, err := c.Client.CoreV1().ConfigMaps(installNamespace).Get(ctx, "kube-reclaim-policy", metav1.GetOptions{}); err != nil || cm.Data["policy.yaml"] != policy {
		t.Errorf("the upgrade changed the policy in force (%v)", err)
	}
	obs := ob.stop(t)
	obs.check(t, 1)
	l, err := c.Client.AppsV1().Deployments(installNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range l.Items {
		if !framework.DeploymentAvailable(&l.Items[i]) {
			t.Errorf("Deployment %s not Available after the rollout", l.Items[i].Name)
		}
	}
	wrote := 0
	for _, e := range publisherWrites(t, c, held) {
		if newPublishers[auditPod(&e)] {
			wrote++
		}
	}
	t.Logf("upgrade %s -> %s: webhook and scheduler rolled out %s after kubectl apply -k; held with the old publisher for %s; publisher rolled out %s after kubectl rollout resume; %s from apply to every role on the new build (%s)",
		u.first.Tag, second.Tag, readers.Sub(applied).Round(time.Millisecond), held.Sub(readers).Round(time.Millisecond),
		done.Sub(held).Round(time.Millisecond), done.Sub(applied).Round(time.Millisecond), deploymentSummary(l.Items))
	t.Logf("upgrade: the new build read the old one's annotations: the new extender bound %d pods on their room, kubelet status writes through the new webhook kept them %v (%s); the new publisher then wrote nodes %d times",
		e1, e2, strings.Join(oldAnnotations, "; "), wrote)
	t.Logf("upgrade: burst of %d pods of %dm/32Mi (room %s), one every 2s, all bound; creations refused and retried: %d %v", created, cpu, rooms, len(retried), retried[:min(len(retried), 5)])
	t.Logf("upgrade: Leases: publisher %s; scheduler %s", obs.leaseHistory(installPublisherLease, applied), obs.leaseHistory(installSchedulerLease, applied))
	t.Logf("upgrade: %s", obs)
}

func annotationWritten(v framework.NodeView) string {
	if v.Ann == nil {
		return "never"
	}
	return v.Ann.WriteTime.Format(time.RFC3339)
}
