package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The addresses of real nodes that run in network namespaces of their own.
// Node slot S (1-254, one per node on the machine) links the host and the
// node by a veth pair 10.200.S.1 (host) - 10.200.S.2 (node) and gives the
// node the pod CIDR 10.201.S.0/24. Nothing in a node's namespace, nor any
// pod, has a route beyond these ranges and the Service range: no packet of
// theirs leaves the machine.
const (
	// APIAddress is the host address the namespaces reach the API server
	// at. It sits on the host's lo while any node namespace exists.
	APIAddress = "10.200.0.1"
	// NodeLinkRange holds every veth pair's addresses.
	NodeLinkRange = "10.200.0.0/16"
	// ClusterCIDR holds every node's pod CIDR (kube-proxy's clusterCIDR).
	ClusterCIDR = "10.201.0.0/16"
	// ServiceCIDR is the apiserver's --service-cluster-ip-range.
	ServiceCIDR = "10.96.0.0/16"
	// KubernetesServiceIP is the `kubernetes` Service's ClusterIP, the
	// KUBERNETES_SERVICE_HOST pods see.
	KubernetesServiceIP = "10.96.0.1"
)

// NodeLinkPrefix names the host end of a node's veth pair; the rest is the
// node's id, so a sweep finds it from the node's directory alone.
const NodeLinkPrefix = "krv"

func netnsLink(id string) string { return NodeLinkPrefix + id }

// netnsFile is where a node's network namespace is pinned (a bind mount of
// nsfs, removed with the other mounts below the node's directory). Pinning
// it there rather than with `ip netns add` leaves /run/netns alone.
func netnsFile(nodeDir string) string { return filepath.Join(nodeDir, "netns") }

// nodeNet is what setupNetwork gave a node.
type nodeNet struct {
	slot    int
	nodeIP  string // namespace end of the veth pair
	hostIP  string // host end
	podCIDR string
}

func netForSlot(s int) nodeNet {
	return nodeNet{slot: s, hostIP: fmt.Sprintf("10.200.%d.1", s), nodeIP: fmt.Sprintf("10.200.%d.2", s),
		podCIDR: fmt.Sprintf("10.201.%d.0/24", s)}
}

// netLock serialises slot allocation and the API address's life across every
// test binary on the machine.
func netLock(ctx context.Context) (func(), error) {
	cache, err := CacheDir()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	return lockFile(ctx, filepath.Join(cache, "netns.lock"))
}

// LockNodeNetwork holds the lock under which nodes of every test binary
// on the machine change the host's network, so a reader sees it whole.
func LockNodeNetwork(ctx context.Context) (unlock func(), err error) { return netLock(ctx) }

func run(name string, args ...string) error {
	out, err := exec.Command(name, args...).CombinedOutput() //nolint:noctx // short network configuration commands
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}

// usedSlots reads the slots taken by host ends of veth pairs.
func usedSlots() (map[int]bool, error) {
	out, err := exec.Command("ip", "-4", "-o", "addr", "show").Output() //nolint:noctx // one quick read
	if err != nil {
		return nil, fmt.Errorf("ip addr show: %w", err)
	}
	return slotsIn(string(out)), nil
}

// slotsIn returns the slots of the 10.200.S.x addresses in `ip -o addr`
// output (S 0 is the API address's, not a node's).
func slotsIn(ipAddrOutput string) map[int]bool {
	used := map[int]bool{}
	for _, f := range strings.Fields(ipAddrOutput) {
		ip, _, err := net.ParseCIDR(f)
		if err != nil {
			continue
		}
		if v4 := ip.To4(); v4 != nil && v4[0] == 10 && v4[1] == 200 && v4[2] != 0 {
			used[int(v4[2])] = true
		}
	}
	return used
}

// setupNetwork creates the node's network namespace, links it to the host
// and routes: host -> every node's pod CIDR, node -> API address, other
// nodes' pod CIDRs and Services. The host forwards only what arrives on the
// node links (per-interface forwarding), so net.ipv4.ip_forward stays as
// it was; the namespaces have no route beyond the cluster's ranges, so
// nothing they send is forwarded to the machine's other interfaces.
func (n *RealNode) setupNetwork(ctx context.Context) error {
	unlock, err := netLock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	used, err := usedSlots()
	if err != nil {
		return err
	}
	slot := 0
	for s := 1; s <= 254; s++ {
		if !used[s] {
			slot = s
			break
		}
	}
	if slot == 0 {
		return errors.New("every node slot 10.200.1-254.0/30 is taken")
	}
	n.net = netForSlot(slot)
	ns, link := netnsFile(n.Dir), netnsLink(n.id)
	if err := os.MkdirAll(n.Dir, 0o755); err != nil {
		return err
	}
	// The pin first: it tells teardownNetwork this node had a namespace.
	if err := os.WriteFile(ns, nil, 0o644); err != nil {
		return err
	}
	if err := ensureAPIAddress(); err != nil {
		return err
	}
	if err := run("unshare", "--net="+ns, "true"); err != nil {
		return err
	}
	hostSide := [][]string{
		{"link", "add", link, "type", "veth", "peer", "name", "eth0", "netns", ns},
		{"addr", "add", n.net.hostIP + "/30", "dev", link},
		{"link", "set", link, "up"},
		{"route", "add", n.net.podCIDR, "via", n.net.nodeIP, "dev", link},
	}
	for _, a := range hostSide {
		if err := run("ip", a...); err != nil {
			return err
		}
	}
	if err := os.WriteFile(filepath.Join("/proc/sys/net/ipv4/conf", link, "forwarding"), []byte("1"), 0o644); err != nil {
		return err
	}
	// /proc/sys/net is the namespace's own once inside it.
	script := strings.Join([]string{
		"set -e",
		"ip link set lo up",
		"ip addr add " + n.net.nodeIP + "/30 dev eth0",
		"ip link set eth0 up",
		"ip route add " + NodeLinkRange + " via " + n.net.hostIP,
		"ip route add " + ClusterCIDR + " via " + n.net.hostIP,
		"ip route add " + ServiceCIDR + " via " + n.net.hostIP,
		"echo 1 > /proc/sys/net/ipv4/ip_forward",
	}, "\n")
	return run("nsenter", "--net="+ns, "sh", "-c", script)
}

// ensureAPIAddress puts APIAddress on the host's lo (a /32: it routes
// nothing). The kernel has no dummy links on these machines.
func ensureAPIAddress() error {
	out, err := exec.Command("ip", "-4", "-o", "addr", "show", "dev", "lo").Output() //nolint:noctx // one quick read
	if err != nil {
		return fmt.Errorf("ip addr show dev lo: %w", err)
	}
	if strings.Contains(string(out), " "+APIAddress+"/32 ") {
		return nil
	}
	return run("ip", "addr", "add", APIAddress+"/32", "dev", "lo")
}

// teardownNetwork removes the node's veth pair (its host route goes with
// it), and the API address once no node namespace is left on the machine.
// The namespace itself ends with the last of its processes and the unmount
// of its pin (below the node's directory). It works from the node's
// directory alone, for sweeps of dead tests.
func teardownNetwork(nodeDir, id string) {
	link := netnsLink(id)
	_, linkErr := os.Stat(filepath.Join("/sys/class/net", link))
	if _, err := os.Stat(netnsFile(nodeDir)); err != nil && linkErr != nil {
		return // not a node with a namespace
	}
	if unlock, err := netLock(context.Background()); err == nil {
		defer unlock()
	}
	if linkErr == nil {
		_ = run("ip", "link", "delete", link)
	}
	// Also when setup failed before making the link: the address may be
	// there all the same.
	if links, _ := filepath.Glob(filepath.Join("/sys/class/net", NodeLinkPrefix+"*")); len(links) == 0 {
		_ = run("ip", "addr", "del", APIAddress+"/32", "dev", "lo")
	}
}

// serveAPIOnNodeNetwork makes the API server reachable at APIAddress (same
// port) for the node namespaces, once per cluster. A relay in this process,
// rather than the apiserver bound to 0.0.0.0: the admin token is in the
// source, and the machine's other interfaces must not offer it.
func (c *Cluster) serveAPIOnNodeNetwork(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.apiRelay != nil {
		return nil
	}
	addr := net.JoinHostPort(APIAddress, strconv.Itoa(c.apiPort))
	l, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("API relay on %s: %w", addr, err)
	}
	c.apiRelay = l
	target := net.JoinHostPort("127.0.0.1", strconv.Itoa(c.apiPort))
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return // closed by Stop
			}
			go relay(conn, target)
		}
	}()
	return c.publishAPIEndpoint(ctx)
}

// relay copies bytes both ways between conn and target until either side
// closes; TLS passes through untouched.
func relay(conn net.Conn, target string) {
	defer conn.Close()
	up, err := (&net.Dialer{Timeout: 5 * time.Second}).Dial("tcp", target)
	if err != nil {
		return
	}
	defer up.Close()
	done := make(chan struct{})
	go func() {
		_, _ = io.Copy(up, conn)
		_ = up.(*net.TCPConn).CloseWrite()
		close(done)
	}()
	_, _ = io.Copy(conn, up)
	_ = conn.(*net.TCPConn).CloseWrite()
	<-done
}

// publishAPIEndpoint gives the `kubernetes` Service its endpoint, which the
// apiserver does not (its endpoint reconciler is off: 127.0.0.1 would be
// refused). kube-proxy reads the EndpointSlice; the Endpoints object is
// for older clients and is kept out of mirroring, which would duplicate the
// slice.
func (c *Cluster) publishAPIEndpoint(ctx context.Context) error {
	const managedBy = "kube-reclaim-test-cluster"
	ready := true
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: metav1.NamespaceDefault, Labels: map[string]string{
			discoveryv1.LabelServiceName: "kubernetes", discoveryv1.LabelManagedBy: managedBy,
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{APIAddress}, Conditions: discoveryv1.EndpointConditions{Ready: &ready}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr("https"), Port: ptr(int32(c.apiPort)), Protocol: ptr(corev1.ProtocolTCP)}},
	}
	if _, err := c.Client.DiscoveryV1().EndpointSlices(metav1.NamespaceDefault).Create(ctx, slice, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubernetes EndpointSlice: %w", err)
	}
	eps := &corev1.Endpoints{ //nolint:staticcheck // the core Endpoints API, for clients that still read it
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: metav1.NamespaceDefault, Labels: map[string]string{
			discoveryv1.LabelSkipMirror: "true",
		}},
		Subsets: []corev1.EndpointSubset{{ //nolint:staticcheck // as above
			Addresses: []corev1.EndpointAddress{{IP: APIAddress}},
			Ports:     []corev1.EndpointPort{{Name: "https", Port: int32(c.apiPort), Protocol: corev1.ProtocolTCP}}, //nolint:staticcheck // as above
		}},
	}
	if _, err := c.Client.CoreV1().Endpoints(metav1.NamespaceDefault).Create(ctx, eps, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("kubernetes Endpoints: %w", err)
	}
	return nil
}

func ptr[T any](v T) *T { return &v }
