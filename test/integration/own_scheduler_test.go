package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"
	"sigs.k8s.io/yaml"

	"github.com/kube-reclaim/kube-reclaim/deploy"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
	"github.com/kube-reclaim/kube-reclaim/test/stack"
)

// ownSchedulerOverlay is the overlay for clusters whose own kube-scheduler
// takes the extender.
const ownSchedulerOverlay = "own-scheduler"

// ownExtender is the extender container of deploy/own-scheduler's DaemonSet
// and the overlay's objects that give it its identity and rights.
type ownExtender struct {
	ds        appsv1.DaemonSet
	container corev1.Container
	identity  []*unstructured.Unstructured // Namespaces, ServiceAccount, RBAC
}

// loadOwnExtender renders deploy/own-scheduler with deploy.Objects, as
// `kubectl apply -k` would install it.
func loadOwnExtender(t *testing.T) ownExtender {
	t.Helper()
	objs, err := deploy.Objects(ownSchedulerOverlay)
	if err != nil {
		t.Fatal(err)
	}
	var o ownExtender
	found := false
	for _, u := range objs {
		switch u.GetKind() {
		case "DaemonSet":
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &o.ds); err != nil {
				t.Fatal(err)
			}
			for _, c := range o.ds.Spec.Template.Spec.Containers {
				if len(c.Args) > 0 && c.Args[0] == stack.Extender {
					o.container, found = c, true
				}
			}
		case "Namespace":
			o.identity = append(o.identity, u)
		case "ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding":
			if u.GetLabels()["app.kubernetes.io/component"] == stack.Extender {
				o.identity = append(o.identity, u)
			}
		}
	}
	if !found {
		t.Fatalf("deploy/%s renders no DaemonSet running the extender", ownSchedulerOverlay)
	}
	if !o.ds.Spec.Template.Spec.HostNetwork {
		t.Fatalf("deploy/%s: the extender DaemonSet is not in the host network; this test runs it as a host process", ownSchedulerOverlay)
	}
	return o
}

// hostArgs are the DaemonSet's arguments for a process on this machine:
// each address flag keeps the deployed host and gets a free port instead of
// the deployed one (the machine is shared with other clusters, and a fixed
// port may be taken), and --kubeconfig replaces the in-cluster credentials
// of the pod. Everything else is as deployed. It returns the arguments,
// the deployed and the local address of each flag.
func hostArgs(t *testing.T, args []string, kubeconfig string) (out []string, deployed, local map[string]string) {
	t.Helper()
	deployed, local = map[string]string{}, map[string]string{}
	for _, a := range args {
		name, value, _ := strings.Cut(a, "=")
		switch name {
		case "--kubeconfig":
			t.Fatalf("the DaemonSet passes %s: a pod uses its ServiceAccount", a)
		case "--listen-address", "--health-address", "--metrics-address":
			host, _, err := net.SplitHostPort(value)
			if err != nil {
				t.Fatalf("%s: %v", a, err)
			}
			port, err := cluster.FreePort()
			if err != nil {
				t.Fatal(err)
			}
			deployed[name], local[name] = value, net.JoinHostPort(host, fmt.Sprint(port))
			a = name + "=" + local[name]
		}
		out = append(out, a)
	}
	for _, f := range []string{"--listen-address", "--health-address", "--metrics-address"} {
		if _, ok := deployed[f]; !ok {
			t.Fatalf("the DaemonSet's extender has no %s: it would run on the flag's default", f)
		}
	}
	return append(out, "--kubeconfig="+kubeconfig), deployed, local
}

// portOf is the port of a host:port address.
func portOf(t *testing.T, addr string) int {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatalf("%s: %v", addr, err)
	}
	return n
}

// ownSchedulerConfig is the configuration deploy/README.md ("Using the
// cluster's own scheduler") tells an admin to give the cluster's own
// kube-scheduler: its default-scheduler profile, plus the profile and the
// extenders entry of deploy/scheduler/kube-scheduler-config.yaml, read from
// the repository file. Changed for the test: the kubeconfig, the leader
// election (the cluster's own scheduler keeps its own Lease,
// kube-system/kube-scheduler, rather than the second scheduler's) and the
// port of urlPrefix (the extender's local port). It returns the YAML and
// the schedulerName of the reclaimed profile.
func ownSchedulerConfig(t *testing.T, kubeconfig, deployedListen, localListen string) (string, string) {
	t.Helper()
	root, err := cluster.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(root, "deploy", "scheduler", "kube-scheduler-config.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := yaml.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	exts, _ := cfg["extenders"].([]any)
	profiles, _ := cfg["profiles"].([]any)
	if len(exts) != 1 || len(profiles) != 1 {
		t.Fatalf("deploy/scheduler/kube-scheduler-config.yaml: %d extenders, %d profiles; want one of each", len(exts), len(profiles))
	}
	ext := exts[0].(map[string]any)
	u, err := url.Parse(fmt.Sprint(ext["urlPrefix"]))
	if err != nil {
		t.Fatal(err)
	}
	// The URL the admin writes must be where the DaemonSet listens.
	if u.Scheme != "http" || u.Host != deployedListen {
		t.Fatalf("urlPrefix %s, but the DaemonSet's extender listens on %s", u, deployedListen)
	}
	u.Host = localListen
	ext["urlPrefix"] = u.String()
	name, _ := profiles[0].(map[string]any)["schedulerName"].(string)
	cfg["profiles"] = append([]any{map[string]any{"schedulerName": corev1.DefaultSchedulerName}}, profiles...)
	cfg["leaderElection"] = map[string]any{"leaderElect": true}
	cfg["clientConnection"] = map[string]any{"kubeconfig": kubeconfig}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return string(out), name
}

// nonLoopbackAddrs are the machine's unicast addresses outside the
// loopback range, link-local IPv6 ones with their zone.
func nonLoopbackAddrs(t *testing.T) []string {
	t.Helper()
	ifaces, err := net.Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, iface := range ifaces {
		if iface.Flags&net.FlagUp == 0 {
			continue
		}
		addrs, err := iface.Addrs()
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range addrs {
			ipn, ok := a.(*net.IPNet)
			if !ok || ipn.IP.IsLoopback() || ipn.IP.IsMulticast() || ipn.IP.IsUnspecified() {
				continue
			}
			host := ipn.IP.String()
			if ipn.IP.To4() == nil && ipn.IP.IsLinkLocalUnicast() {
				host += "%" + iface.Name
			}
			out = append(out, host)
		}
	}
	return out
}

// connects dials host:port over TCP: nil when the connection is accepted.
func connects(host string, port int) error {
	conn, err := net.DialTimeout("tcp", net.JoinHostPort(host, strconv.Itoa(port)), time.Second)
	if err != nil {
		return err
	}
	return conn.Close()
}

// TestOwnSchedulerOverlayPlacesThroughLoopbackExtender runs deploy/own-scheduler
// as its users run it, for real: the extender of its DaemonSet, with the
// DaemonSet's arguments and environment and the overlay's RBAC, as a process
// in this machine's network (as hostNetwork puts it on a control-plane
// node), and a real kube-scheduler configured as deploy/README.md and
// deploy/scheduler tell the admin of the cluster's own scheduler. That
// scheduler places reclaimed pods through the extender on 127.0.0.1; the
// verbs answer on no other address of the machine, and a bind the extender
// did not filter places nothing.
func TestOwnSchedulerOverlayPlacesThroughLoopbackExtender(t *testing.T) {
	ctx := context.Background()
	c := cluster.StartForTest(t, cluster.Options{NoMetricsServer: true, NoScheduler: true})
	own := loadOwnExtender(t)

	// The overlay's namespaces, ServiceAccount and RBAC, for real: the
	// extender runs as its ServiceAccount with nothing more.
	for _, obj := range own.identity {
		createObject(t, c, obj)
	}
	waitBindingsInEffect(t, c.Client, own.identity)
	sa := own.ds.Spec.Template.Spec.ServiceAccountName
	extKubeconfig := serviceAccountKubeconfig(t, c, own.ds.Namespace, sa)

	// Nodes before the extender starts: its informers list them with their
	// annotations, so the first filter already sees the room. roomy has
	// published room; decoy has more reclaimed allocatable (the scheduler's
	// own scoring, LeastAllocated on the reclaimed resources, prefers it)
	// but publishes no room: only the extender's filter keeps pods off it.
	const gib = int64(1 << 30)
	nodes := framework.AddReadyNodes(t, c, 2, cluster.NodeSpec{NamePrefix: "own", Labels: map[string]string{"group": "own"}}, time.Minute)
	roomy, decoy := nodes[0], nodes[1]
	framework.SetAnnotation(t, c, roomy, reclaimable.Annotation{CPUMilli: 4000, MemoryBytes: 4 * gib, Policy: "usage", WriteTime: time.Now()})
	framework.SetReclaimedStatus(t, c, roomy, 4000, 4*gib)
	framework.SetReclaimedStatus(t, c, decoy, 64000, 64*gib)
	// The DaemonSet's extender reads the publisher's Lease; no publisher
	// runs here, so the test keeps it renewed.
	framework.RenewPublisherLease(t, c)

	args, deployed, local := hostArgs(t, own.container.Args, extKubeconfig)
	var env []string
	for _, e := range own.container.Env {
		if e.ValueFrom == nil {
			env = append(env, e.Name+"="+e.Value)
		}
	}
	for _, f := range []string{"--listen-address", "--health-address", "--metrics-address"} {
		t.Logf("%s: deployed %s, here %s (a free port; the host part as deployed)", f, deployed[f], local[f])
	}
	t.Logf("extender as the DaemonSet runs it, as ServiceAccount %s/%s: env %v, args %q", own.ds.Namespace, sa, env, args)
	const extName = "own-extender"
	healthPort, metricsPort := portOf(t, local["--health-address"]), portOf(t, local["--metrics-address"])
	// The admin token passes the SubjectAccessReview of /metrics; the
	// extender's own ServiceAccount sends the reviews.
	stack.RegisterMetrics(healthPort, stack.MetricsEndpoint{Port: metricsPort, Token: stack.AdminToken(c)})
	if err := c.StartProcessWithEnv(extName, framework.KubeReclaim(t), env, args...); err != nil {
		t.Fatal(err)
	}
	ext := framework.AttachRole(c, extName, healthPort)
	ext.WaitReady(t, 90*time.Second)

	schedCfg, profile := ownSchedulerConfig(t, c.Kubeconfig(), deployed["--listen-address"], local["--listen-address"])
	if !slices.Contains(args, "--scheduler-name="+profile) {
		t.Fatalf("the DaemonSet's extender binds for %q, the shipped profile is %q", args, profile)
	}
	t.Logf("kube-scheduler configuration:\n%s", schedCfg)
	schedFile := filepath.Join(c.Dir(), "own-kube-scheduler.yaml")
	if err := os.WriteFile(schedFile, []byte(schedCfg), 0o600); err != nil {
		t.Fatal(err)
	}
	schedPort, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	const schedName = "own-kube-scheduler"
	if err := c.StartProcess(schedName, c.Binaries().Scheduler, "--config="+schedFile,
		"--authentication-kubeconfig="+c.Kubeconfig(), "--authorization-kubeconfig="+c.Kubeconfig(),
		"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", schedPort)); err != nil {
		t.Fatal(err)
	}
	if _, ok := framework.Poll(60*time.Second, 250*time.Millisecond, func() bool {
		l, err := c.Client.CoordinationV1().Leases("kube-system").Get(ctx, "kube-scheduler", metav1.GetOptions{})
		return err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != ""
	}); !ok {
		t.Fatalf("kube-scheduler took no Lease kube-system/kube-scheduler:\n%s", c.Process(schedName).Tail(4096))
	}

	const ns = "own"
	framework.CreateNamespace(t, c, ns)
	profilePod := func(name, group string, cpuMilli, memBytes int64) *corev1.Pod {
		p := reclaimedPod(ns, name, group, cpuMilli, memBytes)
		p.Spec.SchedulerName = profile
		return p
	}
	stored := func(name string) *corev1.Pod {
		t.Helper()
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	filterCalls := func() float64 {
		return ext.Metric(t, "kube_reclaim_extender_nodes_per_call_count", "verb", "filter")
	}
	binds := func() float64 { return ext.Metric(t, "kube_reclaim_extender_binds_total", "result", "success") }
	verbs := "http://" + local["--listen-address"]

	t.Run("a reclaimed pod of the shipped profile is filtered and bound by the extender onto the node with room", func(t *testing.T) {
		filters, bound := filterCalls(), binds()
		unpublished := ext.Metric(t, "kube_reclaim_extender_filtered_nodes_total", "reason", reclaimable.ReasonMissing)
		framework.CreatePod(t, c, profilePod("placed", "own", 1000, gib))
		if got := podNode(t, c, ns, "placed", time.Minute); got != roomy {
			t.Fatalf("placed on %q, want %s, the only node with published room; newest event %q\n%s",
				got, roomy, framework.SchedulingMessage(c, ns, "placed"), c.Process(schedName).Tail(4096))
		}
		if got := filterCalls() - filters; got < 1 {
			t.Errorf("the extender answered %v filter calls for the pod, want at least 1", got)
		}
		if got := ext.Metric(t, "kube_reclaim_extender_filtered_nodes_total", "reason", reclaimable.ReasonMissing) - unpublished; got < 1 {
			t.Errorf("the extender filtered out %v nodes without published room, want %s", got, decoy)
		}
		if got := binds() - bound; got != 1 {
			t.Errorf("binds_total{result=success} went up by %v, want 1: kube-scheduler binds reclaimed pods through the extender", got)
		}
	})

	t.Run("a regular pod of the cluster's default profile is placed without the extender", func(t *testing.T) {
		filters, bound := filterCalls(), binds()
		p := framework.RegularPod(ns, "regular", "", "10m", "16Mi")
		framework.CreatePod(t, c, p)
		if got := podNode(t, c, ns, "regular", time.Minute); got == "" {
			t.Fatalf("regular pod not placed; newest event %q", framework.SchedulingMessage(c, ns, "regular"))
		}
		if f, b := filterCalls()-filters, binds()-bound; f != 0 || b != 0 {
			t.Errorf("the extender saw %v filter calls and %v binds for a pod asking no reclaimed resource, want none", f, b)
		}
	})

	t.Run("a pod larger than any node's room stays Pending with the extender's reason, while one that fits is placed", func(t *testing.T) {
		expectPendingWhileAFitIsPlaced(t, c, ns, roomy, func(name string, cpuMilli int64) *corev1.Pod { return profilePod(name, "own", cpuMilli, gib) },
			"reclaimed-cpu: need 100000m", "no reclaimable annotation")
	})

	t.Run("the verbs answer on the loopback only", func(t *testing.T) {
		verbsPort := portOf(t, local["--listen-address"])
		addrs := nonLoopbackAddrs(t)
		if len(addrs) == 0 {
			t.Log("this machine has no non-loopback address: the check that the verbs refuse other addresses is not made here")
		} else {
			t.Logf("non-loopback addresses of this machine: %v", addrs)
		}
		// Every look: the verbs and the probes refuse every other address of
		// the machine, and answer on 127.0.0.1. The control: /metrics,
		// deployed on all interfaces, accepts on each of those addresses,
		// so a refusal comes from where the extender listens, not from an
		// address this machine cannot reach. Other tests on this machine add
		// and remove interfaces (real nodes' bridges and veths): each look
		// dials only the addresses still assigned, so that no dial leaves
		// the machine.
		r := framework.ExpectAbsence(t, framework.Absence{Window: 3 * time.Second, Every: 250 * time.Millisecond,
			Look: func(time.Duration) ([]string, bool) {
				current := nonLoopbackAddrs(t)
				var v []string
				control := true
				for _, a := range addrs {
					if !slices.Contains(current, a) {
						continue
					}
					for _, port := range []int{verbsPort, healthPort} {
						if connects(a, port) == nil {
							v = append(v, fmt.Sprintf("%s accepted a connection", net.JoinHostPort(a, strconv.Itoa(port))))
						}
					}
					control = control && connects(a, metricsPort) == nil
				}
				for _, port := range []int{verbsPort, healthPort} {
					if err := connects("127.0.0.1", port); err != nil {
						v = append(v, fmt.Sprintf("127.0.0.1:%d refused: %v", port, err))
					}
				}
				return v, control
			}})
		t.Logf("%d looks over 3s: verbs (port %d) and probes (port %d) refused on %d non-loopback addresses, /metrics (port %d) accepted there",
			r.Looks, verbsPort, healthPort, len(addrs), metricsPort)
	})

	t.Run("a forged bind of a pod the extender did not filter places nothing, while the scheduler binds through it", func(t *testing.T) {
		// It selects no node: kube-scheduler never asks the extender about it.
		framework.CreatePod(t, c, profilePod("never-filtered", "no-such-group", 1000, gib))
		forge := func() string {
			p := stored("never-filtered")
			body, err := json.Marshal(extenderv1.ExtenderBindingArgs{PodName: p.Name, PodNamespace: ns, PodUID: p.UID, Node: roomy})
			if err != nil {
				t.Fatal(err)
			}
			resp, err := http.Post(verbs+"/bind", "application/json", strings.NewReader(string(body)))
			if err != nil {
				t.Fatalf("POST /bind: %v", err)
			}
			out := readAll(resp)
			var res extenderv1.ExtenderBindingResult
			if resp.StatusCode != http.StatusOK || json.Unmarshal([]byte(out), &res) != nil {
				t.Fatalf("bind: %d %s", resp.StatusCode, out)
			}
			return res.Error
		}
		before := ext.Metric(t, "kube_reclaim_extender_bind_refusals_total", "reason", "not-filtered")
		if msg := forge(); msg == "" {
			t.Error("the forged bind was not refused")
		} else {
			t.Logf("forged bind refused: %s", msg)
		}
		if got := ext.Metric(t, "kube_reclaim_extender_bind_refusals_total", "reason", "not-filtered"); got != before+1 {
			t.Errorf("bind_refusals_total{reason=not-filtered} went %v -> %v, want one more", before, got)
		}
		bound := binds()
		r := framework.ExpectAbsence(t, framework.Absence{Window: 5 * time.Second, Every: 250 * time.Millisecond,
			ControlWithin: time.Minute,
			Control: func() error {
				_, err := c.Client.CoreV1().Pods(ns).Create(ctx, profilePod("scheduled", "own", 1000, gib), metav1.CreateOptions{})
				return err
			},
			Look: func(time.Duration) ([]string, bool) {
				var v []string
				if msg := forge(); msg == "" {
					v = append(v, "a forged bind of never-filtered was accepted")
				}
				if n := stored("never-filtered").Spec.NodeName; n != "" {
					v = append(v, "never-filtered bound to "+n)
				}
				return v, stored("scheduled").Spec.NodeName == roomy
			}})
		if got := binds() - bound; got != 1 {
			t.Errorf("binds_total{result=success} went up by %v, want 1: the scheduler's bind of the control", got)
		}
		t.Logf("%d looks, forged binds refused at each; the control bound %.1fs into the window", r.Looks, r.ControlSeen.Seconds())
	})

	// Nothing the extender did as its ServiceAccount was refused: a missing
	// right shows up as "forbidden" in its log (and a missing informer
	// right would have kept it from ready).
	if log := c.Process(extName).Tail(1 << 24); strings.Contains(strings.ToLower(log), "forbidden") {
		var lines []string
		for _, l := range strings.Split(log, "\n") {
			if strings.Contains(strings.ToLower(l), "forbidden") {
				lines = append(lines, l)
			}
		}
		t.Errorf("the extender was refused with the overlay's RBAC:\n%s", strings.Join(lines, "\n"))
	}
}
