package integration

import (
	"context"
	"net"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/kube-reclaim/kube-reclaim/test/cluster"
)

// Two real nodes, each in a network namespace of its own with kube-proxy:
// the local cluster the install test stands on. Pods on one node reach pods
// on the other through a Service, and the API server through in-cluster
// configuration; the host's network is as before once the cluster stops.
func TestRealNodesInNetworkNamespacesServeServices(t *testing.T) {
	if testing.Short() {
		t.Skip("short mode: real nodes take a minute")
	}
	if os.Geteuid() != 0 {
		t.Skip("real nodes need root (kubelet manages cgroups and mounts, the nodes need network namespaces)")
	}
	ctx := context.Background()
	netBefore := readHostNetwork(t)
	hostBefore := readHostState()
	c := cluster.StartForTest(t, cluster.Options{NoScheduler: true, NoMetricsServer: true})
	nodes := map[string]*cluster.RealNode{}
	for _, name := range []string{"net-a", "net-b"} {
		start := time.Now()
		rn, err := c.AddRealNode(ctx, name, cluster.RealNodeSpec{NetworkNamespace: true})
		if err != nil {
			t.Fatal(err)
		}
		nodes[name] = rn
		t.Logf("node %s: IP %s, pod CIDR %s, Ready with kube-proxy healthy after %s", name, rn.NodeIP(), rn.PodCIDR(),
			time.Since(start).Round(time.Millisecond))
	}
	const ns = "default"

	t.Run("each node reports its own address and pod CIDR", func(t *testing.T) {
		seen := map[string]bool{}
		for name, rn := range nodes {
			node, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			var internal []string
			for _, a := range node.Status.Addresses {
				if a.Type == corev1.NodeInternalIP {
					internal = append(internal, a.Address)
				}
			}
			if len(internal) != 1 || internal[0] != rn.NodeIP() || net.ParseIP(rn.NodeIP()).IsLoopback() {
				t.Errorf("node %s InternalIP %v, want [%s] (not loopback)", name, internal, rn.NodeIP())
			}
			if node.Spec.PodCIDR != rn.PodCIDR() || seen[node.Spec.PodCIDR] {
				t.Errorf("node %s pod CIDR %q, want %s, unique", name, node.Spec.PodCIDR, rn.PodCIDR())
			}
			seen[node.Spec.PodCIDR] = true
		}
	})

	t.Run("a pod on one node reaches a pod on the other through a ClusterIP Service", func(t *testing.T) {
		server := netPod(ns, "echo", "net-b", corev1.EnvVar{Name: "SERVE", Value: ":8080"})
		server.Labels = map[string]string{"app": "echo"}
		s := runPod(t, c, server, corev1.PodRunning, 90*time.Second)
		assertPodIn(t, s, nodes["net-b"])
		svc, err := c.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "echo"},
			Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "echo"},
				Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		client := runPod(t, c, netPod(ns, "echo-client", "net-a", corev1.EnvVar{Name: "GET_URL", Value: "http://" + svc.Spec.ClusterIP + "/"}),
			corev1.PodSucceeded, 90*time.Second)
		assertPodIn(t, client, nodes["net-a"])
		msg := terminationMessage(client)
		if !strings.Contains(msg, "200: workload echo") {
			t.Fatalf("client's result %q, want the echo pod's answer", msg)
		}
		t.Logf("pod %s on net-a -> Service %s -> pod %s on net-b: %q (pod created to Succeeded in %s)",
			client.Status.PodIP, svc.Spec.ClusterIP, s.Status.PodIP, msg, time.Since(start).Round(time.Millisecond))
	})

	t.Run("a pod reaches the API server through in-cluster configuration", func(t *testing.T) {
		// The pod reads itself: a request only its own token is allowed.
		_, err := c.Client.RbacV1().Roles(ns).Create(ctx, &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.Client.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "pod-reader"},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "pod-reader"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "default", Namespace: ns}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, node := range []string{"net-a", "net-b"} {
			name := "api-client-" + node
			pod := netPod(ns, name, node, corev1.EnvVar{Name: "GET_API_PATH", Value: "/api/v1/namespaces/" + ns + "/pods/" + name})
			pod.Spec.AutomountServiceAccountToken = nil
			p := runPod(t, c, pod, corev1.PodSucceeded, 90*time.Second)
			msg := terminationMessage(p)
			want := "GET https://" + cluster.KubernetesServiceIP + ":443/api/v1/namespaces/" + ns + "/pods/" + name + ": 200:"
			if !strings.HasPrefix(msg, want) || !strings.Contains(msg, `"name":"`+name+`"`) {
				t.Fatalf("pod %s's result %q, want %q and its own object", name, msg, want)
			}
			t.Logf("pod %s on %s: %.120s...", name, node, msg)
		}
	})

	t.Run("after the cluster stops the host's network is as before", func(t *testing.T) {
		var own []string
		for _, rn := range nodes {
			own = append(own, rn.HostLink())
		}
		during := readHostNetwork(t, own...)
		// Positive control: the nodes' links, routes and the API address
		// exist while they run, and kube-proxy's rules are in the nodes'
		// namespaces, not the host's.
		for _, rn := range nodes {
			if !slices.ContainsFunc(during.routes, func(r string) bool { return strings.HasPrefix(r, rn.PodCIDR()+" via "+rn.NodeIP()) }) {
				t.Errorf("no host route to %s via %s while the node runs: %v", rn.PodCIDR(), rn.NodeIP(), during.routes)
			}
			out, err := exec.Command("nsenter", "--net="+rn.Dir+"/netns", "iptables-save", "-t", "nat").CombinedOutput() //nolint:noctx // one quick read
			if err != nil || !strings.Contains(string(out), "default/kubernetes:https") {
				t.Errorf("node %s's namespace has no kube-proxy rule for default/kubernetes (%v): %.300s", rn.Name, err, out)
			}
		}
		if len(during.links) <= len(netBefore.links) || !during.apiAddress {
			t.Errorf("no node link or API address on the host while the nodes run: %v %v", during.links, during.addrs)
		}
		if slices.ContainsFunc(during.nat, func(r string) bool { return strings.Contains(r, "KUBE-") }) {
			t.Errorf("kube-proxy rules in the host's nat table: %v", during.nat)
		}
		dirs := []string{nodes["net-a"].Dir, nodes["net-b"].Dir}
		c.Stop()
		after := readHostNetwork(t, own...)
		// The API address is the nodes' of every cluster on the machine: it
		// stays exactly while another test's node is there.
		if after.apiAddress != after.otherNodes {
			t.Errorf("after the stop the API address %s is on lo: %v, other tests' nodes on the host: %v", cluster.APIAddress, after.apiAddress, after.otherNodes)
		}
		for _, cmp := range []struct {
			what          string
			before, after []string
		}{
			{"ip netns list", netBefore.netns, after.netns},
			{"ip link", netBefore.links, after.links},
			{"ip -4 addr", netBefore.addrs, after.addrs},
			{"ip route", netBefore.routes, after.routes},
			{"iptables -S", netBefore.filter, after.filter},
			{"iptables -t nat -S", netBefore.nat, after.nat},
		} {
			if !slices.Equal(cmp.before, cmp.after) {
				t.Errorf("%s changed:\nbefore %q\nafter  %q", cmp.what, cmp.before, cmp.after)
			}
		}
		now := readHostState()
		for k, v := range hostBefore.sysctls {
			if now.sysctls[k] != v {
				t.Errorf("host sysctl %s changed from %s to %s", k, v, now.sysctls[k])
			}
		}
		for p, existed := range hostBefore.paths {
			if !existed && now.paths[p] {
				t.Errorf("host path %s created by a node and left behind", p)
			}
		}
		for _, d := range dirs {
			if left := processesMentioning(d); len(left) > 0 {
				t.Errorf("processes still using %s: %v", d, left)
			}
		}
		t.Logf("while running: %d links, %d routes; after: %d links, %d routes, as before", len(during.links), len(during.routes), len(after.links), len(after.routes))
	})
}

// netPod runs the workload image on a node with env, without a token unless
// the caller says otherwise.
func netPod(ns, name, node string, env ...corev1.EnvVar) *corev1.Pod {
	p := workloadPod(ns, name, node, corev1.ResourceRequirements{})
	p.Spec.Containers[0].Env = env
	return p
}

func assertPodIn(t *testing.T, p *corev1.Pod, rn *cluster.RealNode) {
	t.Helper()
	_, cidr, err := net.ParseCIDR(rn.PodCIDR())
	if err != nil {
		t.Fatal(err)
	}
	if ip := net.ParseIP(p.Status.PodIP); ip == nil || !cidr.Contains(ip) {
		t.Errorf("pod %s has IP %q, outside its node %s's pod CIDR %s", p.Name, p.Status.PodIP, rn.Name, rn.PodCIDR())
	}
}

func terminationMessage(p *corev1.Pod) string {
	if len(p.Status.ContainerStatuses) == 0 || p.Status.ContainerStatuses[0].State.Terminated == nil {
		return ""
	}
	return p.Status.ContainerStatuses[0].State.Terminated.Message
}

// hostNetwork is the host's network configuration a node must leave as it
// found it.
type hostNetwork struct {
	netns, links, addrs, routes, filter, nat []string
	// apiAddress: the shared API address is on lo; otherNodes: a node of
	// another test (another cluster) has its link on the host.
	apiAddress, otherNodes bool
}

// readHostNetwork reads it, under the lock nodes change it under. Other
// tests' real nodes come and go while this test runs (make test runs the
// suites side by side): their krbr* bridges, their pods' veth* ends and
// the links, addresses and routes of their namespaces (krv* not in own) are
// left out, and so is the API address the nodes of every cluster share;
// whether it and other nodes are there is recorded instead.
func readHostNetwork(t *testing.T, own ...string) hostNetwork {
	t.Helper()
	unlock, err := cluster.LockNodeNetwork(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer unlock()
	var h hostNetwork
	lines := func(args ...string) []string {
		out, err := exec.Command(args[0], args[1:]...).Output() //nolint:noctx // one quick read
		if err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		var keep []string
		for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			switch {
			case l == "" || strings.Contains(l, "krbr") || strings.Contains(l, "veth"):
			case strings.Contains(l, cluster.NodeLinkPrefix) && !slices.ContainsFunc(own, func(o string) bool { return strings.Contains(l, o) }):
				h.otherNodes = true
			case strings.Contains(l, " "+cluster.APIAddress+"/32 "):
				h.apiAddress = true
			default:
				keep = append(keep, l)
			}
		}
		return keep
	}
	for _, l := range lines("ip", "-o", "link", "show") {
		// "3: name@peer: <FLAGS> ..." -> name; counters and states change.
		if f := strings.Fields(l); len(f) > 1 {
			h.links = append(h.links, strings.Split(strings.TrimSuffix(f[1], ":"), "@")[0])
		}
	}
	for _, l := range lines("ip", "-4", "-o", "addr", "show") {
		if f := strings.Fields(l); len(f) > 3 {
			h.addrs = append(h.addrs, f[1]+" "+f[3])
		}
	}
	h.netns = lines("ip", "netns", "list")
	h.routes = lines("ip", "-4", "route", "show", "table", "main")
	h.filter = lines("iptables", "-S")
	h.nat = lines("iptables", "-t", "nat", "-S")
	return h
}
