package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/yaml"

	"github.com/kube-reclaim/kube-reclaim/test/images"
)

// RealNodeSpec configures a real node: kubelet v1.34.4 with its own
// containerd and runc, beside the cluster's kwok nodes.
type RealNodeSpec struct {
	// StatusUpdateFrequency is kubelet's nodeStatusUpdateFrequency: how often
	// it computes node status and posts it if anything changed (default 10s).
	StatusUpdateFrequency time.Duration
	// StatusReportFrequency is kubelet's nodeStatusReportFrequency: how often
	// it posts status when nothing changed (default 5m, kubelet's own).
	StatusReportFrequency time.Duration
	// LeaseDurationSeconds is the node Lease duration (default 40).
	LeaseDurationSeconds int
	// Labels are registered with the node (kubelet --node-labels).
	Labels map[string]string
	// NetworkNamespace runs the node in a network namespace of its own, as
	// a machine of its own: a node IP and pod CIDR of its own, routed to
	// the host and to the other such nodes, and kube-proxy, so Services
	// and in-cluster configuration work in its pods (see nodenetwork.go).
	// Without it the node shares the host's network, reports 127.0.0.1 and
	// has no kube-proxy: its pods reach nothing but themselves.
	NetworkNamespace bool
	// SystemReserved is kubelet's systemReserved (for example memory:
	// "22Gi"): node allocatable and the limit of the pods' cgroup leave it
	// to the rest of the machine, so a node can be made small on a large
	// machine.
	SystemReserved map[string]string
	// EvictionHard overrides entries of kubelet's evictionHard; the others
	// keep their defaults here (memory.available 50Mi, the disks 1 %).
	EvictionHard map[string]string
}

func (s *RealNodeSpec) defaults() {
	if s.StatusUpdateFrequency == 0 {
		s.StatusUpdateFrequency = 10 * time.Second
	}
	if s.StatusReportFrequency == 0 {
		s.StatusReportFrequency = 5 * time.Minute
	}
	if s.LeaseDurationSeconds == 0 {
		s.LeaseDurationSeconds = 40
	}
}

// The real node's images; pod specs use these names with imagePullPolicy Never.
const (
	PauseImage    = images.Pause
	WorkloadImage = images.Workload
)

// RealNode is one kubelet and its containerd. Everything it creates lives
// under Dir, a cgroup subtree of its own (CgroupRoot) and a bridge of its
// own; Stop removes all of it, and so does the cluster's Stop.
type RealNode struct {
	Name string
	// Dir holds containerd's root and state, kubelet's root dir, CNI state
	// and both logs.
	Dir string
	// CgroupRoot is kubelet's cgroupRoot, e.g. /kube-reclaim-1a2b3c4d; pods
	// live under <hierarchy>/<CgroupRoot>/kubepods.
	CgroupRoot string
	// KubeletPort is kubelet's HTTPS port on the node IP.
	KubeletPort int

	c          *Cluster
	spec       RealNodeSpec
	id         string
	bridge     string
	runtime    *NodeRuntime
	kubeletBin string
	containerd *Process
	kubelet    *Process
	ipForward  string // host net.ipv4.ip_forward before the node started
	// net, kubeProxyBin and kubeProxy: a node with a NetworkNamespace.
	net          nodeNet
	kubeProxyBin string
	kubeProxy    *Process
}

// Component names of a real node's processes, as Cluster.Process knows them.
func containerdName(node string) string { return "containerd-" + node }
func kubeletName(node string) string    { return "kubelet-" + node }
func kubeProxyName(node string) string  { return "kube-proxy-" + node }

// hostSysctls are the sysctls kubelet sets on start; it runs in a mount
// namespace where each is a plain file, so the machine keeps its values.
var hostSysctls = []string{
	"kernel/panic", "kernel/panic_on_oops", "vm/overcommit_memory", "vm/panic_on_oom",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes",
}

// AddRealNode starts containerd and kubelet for a node called name and waits
// until the node is Ready. It needs root; the container runtime packages are
// installed when missing and kubelet is built on first use.
func (c *Cluster) AddRealNode(ctx context.Context, name string, spec RealNodeSpec) (n *RealNode, err error) {
	spec.defaults()
	if os.Geteuid() != 0 {
		return nil, errors.New("a real node needs root (kubelet manages cgroups and mounts)")
	}
	rt, err := EnsureNodePackages(ctx, c.opts.Log)
	if err != nil {
		return nil, err
	}
	kubelet, err := EnsureKubelet(ctx, c.opts.Log)
	if err != nil {
		return nil, err
	}
	var kubeProxy string
	if spec.NetworkNamespace {
		if kubeProxy, err = EnsureKubeProxy(ctx, c.opts.Log); err != nil {
			return nil, err
		}
	}
	dir := filepath.Join(c.dir, nodeDirPrefix+name)
	id, cgroupRoot, bridge := nodeIdentity(dir)
	n = &RealNode{
		Name: name, Dir: dir, CgroupRoot: cgroupRoot,
		c: c, spec: spec, id: id, bridge: bridge, runtime: rt, kubeletBin: kubelet, kubeProxyBin: kubeProxy,
	}
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return nil, errors.New("cluster is stopped")
	}
	c.realNodes = append(c.realNodes, n)
	c.mu.Unlock()
	defer func() {
		if err != nil {
			err = fmt.Errorf("real node %s: %w\n--- containerd ---\n%s\n--- kubelet ---\n%s\n--- kube-proxy ---\n%s", name, err,
				tailOf(n.containerd), tailOf(n.kubelet), tailOf(n.kubeProxy))
		}
	}()
	start := time.Now()
	if n.KubeletPort, err = freePort(); err != nil {
		return n, err
	}
	n.ipForward = readTrimmed("/proc/sys/net/ipv4/ip_forward")
	if spec.NetworkNamespace {
		// The network first: it puts APIAddress on the host.
		if err = n.setupNetwork(ctx); err != nil {
			return n, err
		}
		if err = c.serveAPIOnNodeNetwork(ctx); err != nil {
			return n, err
		}
	}
	if err = n.writeFiles(); err != nil {
		return n, err
	}
	if err = n.makeCgroupRoot(); err != nil {
		return n, err
	}
	if err = n.startContainerd(ctx); err != nil {
		return n, err
	}
	if err = n.importImages(ctx); err != nil {
		return n, err
	}
	if err = n.StartKubelet(ctx); err != nil {
		return n, err
	}
	if spec.NetworkNamespace {
		if err = n.startKubeProxy(ctx); err != nil {
			return n, err
		}
	}
	fmt.Fprintf(c.opts.Log, "cluster: real node %s Ready after %s\n", name, time.Since(start).Round(time.Millisecond))
	return n, nil
}

func tailOf(p *Process) string {
	if p == nil {
		return "(not started)"
	}
	return p.Tail(3000)
}

func readTrimmed(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func (n *RealNode) path(parts ...string) string {
	return filepath.Join(append([]string{n.Dir}, parts...)...)
}

func (n *RealNode) socket() string { return n.path("containerd", "containerd.sock") }

// NodeIP is the node's InternalIP: 127.0.0.1, or its own address with a
// NetworkNamespace.
func (n *RealNode) NodeIP() string {
	if n.spec.NetworkNamespace {
		return n.net.nodeIP
	}
	return "127.0.0.1"
}

// HostLink is the host end of the node's veth pair (empty without a
// NetworkNamespace): what a test of the host's network tells apart from
// other tests' nodes.
func (n *RealNode) HostLink() string {
	if !n.spec.NetworkNamespace {
		return ""
	}
	return netnsLink(n.id)
}

// PodCIDR is the node's spec.podCIDR, the range its pods' addresses come
// from (empty without a NetworkNamespace: the node has none).
func (n *RealNode) PodCIDR() string { return n.net.podCIDR }

// apiServer is the API server's URL as the node's processes reach it.
func (n *RealNode) apiServer() string {
	if n.spec.NetworkNamespace {
		return fmt.Sprintf("https://%s:%d", APIAddress, n.c.apiPort)
	}
	return fmt.Sprintf("https://127.0.0.1:%d", n.c.apiPort)
}

// command wraps a command line (unshare and its arguments) so that it runs
// in the node's network namespace when it has one.
func (n *RealNode) command(args ...string) (string, []string) {
	if !n.spec.NetworkNamespace {
		return args[0], args[1:]
	}
	return "nsenter", append([]string{"--net=" + netnsFile(n.Dir)}, args...)
}

// KubeletRootDir is kubelet's --root-dir.
func (n *RealNode) KubeletRootDir() string { return n.path("kubelet") }

func (n *RealNode) writeFiles() error {
	for _, d := range []string{"containerd", "kubelet", "kubelet-certs", "pod-logs", "volume-plugins",
		"cni/net.d", "cni/ipam", "sysctl", "opt", "images"} {
		if err := os.MkdirAll(n.path(d), 0o755); err != nil {
			return err
		}
	}
	// kubelet's own mount namespace must share its root dir with the host
	// (and so with containerd), or volumes it mounts never reach containers.
	if err := shareDir(n.KubeletRootDir()); err != nil {
		return err
	}
	for _, s := range hostSysctls {
		v := readTrimmed(filepath.Join("/proc/sys", s))
		if err := os.WriteFile(n.path("sysctl", strings.ReplaceAll(s, "/", ".")), []byte(v+"\n"), 0o644); err != nil {
			return err
		}
	}
	files := map[string][]byte{
		"containerd/config.toml":       []byte(n.containerdConfig()),
		"cni/net.d/10-bridge.conflist": n.cniConfig(),
		"resolv.conf":                  []byte("nameserver 127.0.0.1\n"),
	}
	for name, data := range files {
		if err := os.WriteFile(n.path(name), data, 0o644); err != nil {
			return err
		}
	}
	kp, err := n.c.ca.Issue(CertSpec{CommonName: "system:node:" + n.Name, Client: true,
		// system:masters: the cluster runs RBAC without the Node authorizer.
		Organization: []string{"system:nodes", "system:masters"}})
	if err != nil {
		return err
	}
	cert, key, err := kp.Write(n.Dir, "kubelet-client")
	if err != nil {
		return err
	}
	auth := &clientcmdapi.AuthInfo{ClientCertificate: cert, ClientKey: key}
	if err := writeKubeconfig(n.path("kubelet.kubeconfig"), n.apiServer(), n.c.ca.CertPEM, "kubelet", auth); err != nil {
		return err
	}
	cfg, err := yaml.Marshal(n.kubeletConfig())
	if err != nil {
		return err
	}
	if err := os.WriteFile(n.path("kubelet.yaml"), cfg, 0o644); err != nil {
		return err
	}
	if n.spec.NetworkNamespace {
		return n.writeKubeProxyFiles()
	}
	return nil
}

// cniConfig is the node's one CNI network: a bridge of its own with
// host-local addresses.
func (n *RealNode) cniConfig() []byte {
	// Without a namespace: no gateway and no masquerading; nothing routes to
	// pods, and the plugin leaves the host's ip_forward alone.
	bridge := map[string]any{
		"type": "bridge", "bridge": n.bridge,
		"isGateway": false, "ipMasq": false, "hairpinMode": false,
		"ipam": map[string]any{
			"type": "host-local", "dataDir": n.path("cni", "ipam"),
			"ranges": []any{[]any{map[string]any{"subnet": "10.244.0.0/16"}}},
		},
	}
	if n.spec.NetworkNamespace {
		// The bridge is the pods' gateway, in the node's namespace. Pods get
		// routes to the cluster's ranges only, no default route. Hairpin: a
		// pod may reach itself through its Service.
		bridge["isGateway"], bridge["hairpinMode"] = true, true
		bridge["ipam"] = map[string]any{
			"type": "host-local", "dataDir": n.path("cni", "ipam"),
			"ranges": []any{[]any{map[string]any{"subnet": n.net.podCIDR}}},
			"routes": []any{
				map[string]any{"dst": NodeLinkRange}, map[string]any{"dst": ClusterCIDR}, map[string]any{"dst": ServiceCIDR},
			},
		}
	}
	return mustJSON(map[string]any{
		"cniVersion": "1.0.0", "name": "kube-reclaim-" + n.id,
		"plugins": []any{bridge, map[string]any{"type": "loopback"}},
	})
}

func mustJSON(v any) []byte {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		panic(err)
	}
	return b
}

func (n *RealNode) containerdConfig() string {
	q := strconv.Quote
	return `version = 2
root = ` + q(n.path("containerd", "root")) + `
state = ` + q(n.path("containerd", "state")) + `
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = ` + q(n.socket()) + `
[ttrpc]
  address = ` + q(n.socket()+".ttrpc") + `
[debug]
  address = ` + q(n.socket()+".debug") + `

[plugins."io.containerd.internal.v1.opt"]
  path = ` + q(n.path("opt")) + `
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = ` + q(PauseImage) + `
  # Without it every sandbox fails: runc cannot lower oom_score_adj
  # ("can't get final child's PID from pipe: EOF").
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "native"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        BinaryName = ` + q(n.runtime.Runc) + `
        SystemdCgroup = false
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = ` + q(n.runtime.CNIBinDir) + `
    conf_dir = ` + q(n.path("cni", "net.d")) + `
    max_conf_num = 1
`
}

func (n *RealNode) kubeletConfig() map[string]any {
	endpoint := "unix://" + n.socket()
	healthz, _ := freePort()
	labels := map[string]string{}
	for k, v := range n.spec.Labels {
		labels[k] = v
	}
	// A shared development disk must not evict test pods.
	evictionHard := map[string]string{
		"memory.available": "50Mi", "nodefs.available": "1%", "imagefs.available": "1%", "nodefs.inodesFree": "1%",
	}
	maps.Copy(evictionHard, n.spec.EvictionHard)
	cfg := map[string]any{
		"apiVersion":                "kubelet.config.k8s.io/v1beta1",
		"kind":                      "KubeletConfiguration",
		"cgroupDriver":              "cgroupfs",
		"cgroupRoot":                n.CgroupRoot,
		"cgroupsPerQOS":             true,
		"enforceNodeAllocatable":    []string{"pods"},
		"failSwapOn":                false,
		"failCgroupV1":              false,
		"containerRuntimeEndpoint":  endpoint,
		"imageServiceEndpoint":      endpoint,
		"address":                   n.NodeIP(),
		"port":                      n.KubeletPort,
		"healthzBindAddress":        "127.0.0.1",
		"healthzPort":               healthz,
		"readOnlyPort":              0,
		"makeIPTablesUtilChains":    false,
		"podLogsDir":                n.path("pod-logs"),
		"volumePluginDir":           n.path("volume-plugins"),
		"resolvConf":                n.path("resolv.conf"),
		"nodeStatusUpdateFrequency": n.spec.StatusUpdateFrequency.String(),
		"nodeStatusReportFrequency": n.spec.StatusReportFrequency.String(),
		"nodeLeaseDurationSeconds":  n.spec.LeaseDurationSeconds,
		"authentication": map[string]any{
			"anonymous": map[string]any{"enabled": true},
			"webhook":   map[string]any{"enabled": false},
		},
		"authorization": map[string]any{"mode": "AlwaysAllow"},
		// The images are imported, never pulled: garbage collecting them
		// would break every later pod on a machine whose disk is full.
		"imageGCHighThresholdPercent": 100,
		"imageGCLowThresholdPercent":  99,
		"evictionHard":                evictionHard,
		"kubeAPIQPS":                  50,
		"kubeAPIBurst":                100,
	}
	if len(n.spec.SystemReserved) > 0 {
		cfg["systemReserved"] = n.spec.SystemReserved
	}
	return cfg
}

// shareDir bind-mounts dir on itself and makes it a shared mount, so mounts
// made below it in one mount namespace appear in the others.
func shareDir(dir string) error {
	if out, err := exec.Command("mount", "--bind", dir, dir).CombinedOutput(); err != nil { //nolint:noctx // a mount call
		return fmt.Errorf("mount --bind %s: %w: %s", dir, err, out)
	}
	if out, err := exec.Command("mount", "--make-shared", dir).CombinedOutput(); err != nil { //nolint:noctx // a mount call
		return fmt.Errorf("mount --make-shared %s: %w: %s", dir, err, out)
	}
	return nil
}

// privateNamespaceScript runs a program in a new mount namespace where the
// host paths it would write are private: the root mount and /proc stop
// propagating (so nothing mounted here reaches the host), each sysctl file
// is a plain file (withSysctls), and each of tmpfsDirs is an empty tmpfs.
// Host paths the programs write whatever their flags say: kubelet
// /var/lib/kubelet/device-plugins and /var/log/containers, libcni
// /var/lib/cni, containerd its shim sockets under /run/containerd/s and runc
// its state under /run/containerd/runc. varLibKubelet, when set, is bound on
// /var/lib/kubelet so that directory persists across restarts as on a real
// node. The node's shared directories (kubelet's root dir) keep propagating.
func (n *RealNode) privateNamespaceScript(tmpfsDirs []string, varLibKubelet string, withSysctls bool) string {
	var b strings.Builder
	b.WriteString("set -e\n")
	b.WriteString("for m in / /proc")
	for _, d := range tmpfsDirs {
		fmt.Fprintf(&b, " $(findmnt -n -o TARGET -T %s)", shellQuote(d))
	}
	b.WriteString("; do mount --make-private \"$m\"; done\n")
	b.WriteString("mount --make-rprivate /proc\n")
	if withSysctls {
		for _, s := range hostSysctls {
			if _, err := os.Stat(filepath.Join("/proc/sys", s)); err != nil {
				continue
			}
			fmt.Fprintf(&b, "mount --bind %s %s\n", shellQuote(n.path("sysctl", strings.ReplaceAll(s, "/", "."))),
				shellQuote(filepath.Join("/proc/sys", s)))
		}
	}
	for _, d := range tmpfsDirs {
		fmt.Fprintf(&b, "mount -t tmpfs -o mode=755 kube-reclaim %s\n", shellQuote(d))
	}
	if varLibKubelet != "" {
		fmt.Fprintf(&b, "mkdir -p /var/lib/kubelet && mount --bind %s /var/lib/kubelet\n", shellQuote(varLibKubelet))
	}
	b.WriteString("exec \"$0\" \"$@\"\n")
	return b.String()
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func (n *RealNode) startContainerd(ctx context.Context) error {
	script := n.privateNamespaceScript([]string{"/var/lib", "/var/log", "/run"}, "", false)
	bin, args := n.command("unshare", "-m", "--propagation", "unchanged", "--",
		"/bin/sh", "-c", script, n.runtime.Containerd, "--config", n.path("containerd", "config.toml"))
	if err := n.c.StartProcess(containerdName(n.Name), bin, args...); err != nil {
		return err
	}
	n.containerd = n.c.Process(containerdName(n.Name))
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if !n.containerd.Running() {
			return false, errors.New("containerd exited")
		}
		return exec.CommandContext(ctx, n.runtime.Ctr, "-a", n.socket(), "version").Run() == nil, nil
	})
}

func (n *RealNode) importImages(ctx context.Context) error {
	root, err := RepoRoot()
	if err != nil {
		return err
	}
	imgs, err := images.Build(ctx, root, n.path("images"))
	if err != nil {
		return err
	}
	var tarballs []string
	for _, img := range imgs {
		tarballs = append(tarballs, img.Tarball)
	}
	return n.ImportImages(ctx, tarballs...)
}

// ImportImages imports OCI image archives into the node's containerd, where
// pods with imagePullPolicy Never or IfNotPresent find them under the names
// the archives carry.
func (n *RealNode) ImportImages(ctx context.Context, tarballs ...string) error {
	for _, t := range tarballs {
		out, err := exec.CommandContext(ctx, n.runtime.Ctr, "-a", n.socket(), "-n", "k8s.io", "images", "import",
			"--snapshotter", "native", t).CombinedOutput()
		if err != nil {
			return fmt.Errorf("ctr images import %s: %w: %s", t, err, out)
		}
	}
	return nil
}

// StartKubelet starts kubelet (again) and waits until the node is Ready.
func (n *RealNode) StartKubelet(ctx context.Context) error {
	args := []string{"unshare", "-m", "--propagation", "unchanged", "--",
		"/bin/sh", "-c", n.privateNamespaceScript([]string{"/var/lib", "/var/log"}, n.KubeletRootDir(), true), n.kubeletBin,
		"--config=" + n.path("kubelet.yaml"),
		"--kubeconfig=" + n.path("kubelet.kubeconfig"),
		"--root-dir=" + n.KubeletRootDir(),
		"--cert-dir=" + n.path("kubelet-certs"),
		"--hostname-override=" + n.Name,
		"--node-ip=" + n.NodeIP(),
		"--v=2",
	}
	if len(n.spec.Labels) > 0 {
		var l []string
		for k, v := range n.spec.Labels {
			l = append(l, k+"="+v)
		}
		args = append(args, "--node-labels="+strings.Join(l, ","))
	}
	bin, args := n.command(args...)
	if err := n.c.StartProcess(kubeletName(n.Name), bin, args...); err != nil {
		return err
	}
	n.kubelet = n.c.Process(kubeletName(n.Name))
	return n.waitReady(ctx)
}

// StopKubelet stops kubelet gracefully; its pods keep running, as on a real
// node whose kubelet restarts.
func (n *RealNode) StopKubelet() error { return n.kubelet.Stop() }

// RestartKubelet stops and starts kubelet, keeping its root dir.
func (n *RealNode) RestartKubelet(ctx context.Context) error {
	if err := n.StopKubelet(); err != nil {
		return err
	}
	return n.StartKubelet(ctx)
}

// Reregister restarts kubelet with an empty root dir, as on a node that was
// reinstalled: kubelet then takes itself for a new node and zeroes every
// extended resource in the status it registers (its device-plugin
// checkpoint is gone). With deleteNode the Node object is deleted first, so
// kubelet creates it from scratch. Delete the node's pods first: their
// volumes vanish with the root dir.
func (n *RealNode) Reregister(ctx context.Context, deleteNode bool) error {
	if err := n.StopKubelet(); err != nil {
		return err
	}
	if deleteNode {
		err := n.c.Client.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
			_, err := n.c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
			return apierrors.IsNotFound(err), nil
		}); err != nil {
			return fmt.Errorf("node %s not deleted: %w", n.Name, err)
		}
	}
	root := n.KubeletRootDir()
	unmountBelow(root, false)
	entries, err := os.ReadDir(root)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if err := os.RemoveAll(filepath.Join(root, e.Name())); err != nil {
			return err
		}
	}
	return n.StartKubelet(ctx)
}

// Kubelet is the kubelet process (for its pid and log).
func (n *RealNode) Kubelet() *Process { return n.kubelet }

// Containerd is the containerd process.
func (n *RealNode) Containerd() *Process { return n.containerd }

// waitReady waits for the Node to be Ready. A node in the host's network
// gets the loopback InternalIP kubelet refuses to report itself ("nodeIP
// can't be loopback"); kubelet keeps an address it finds in status. A
// Hostname address is left out on purpose: the apiserver would resolve it
// through outside DNS. A node in its own namespace reports its address
// itself and gets its pod CIDR (nothing allocates them: the
// controller-manager runs without --allocate-node-cidrs).
func (n *RealNode) waitReady(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	addrPatch, _ := json.Marshal(map[string]any{"status": map[string]any{
		"addresses": []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}},
	}})
	cidrPatch, _ := json.Marshal(map[string]any{"spec": map[string]any{
		"podCIDR": n.net.podCIDR, "podCIDRs": []string{n.net.podCIDR},
	}})
	// API errors are retried until ctx ends; the last one says why it did.
	var lastErr error
	err := wait.PollUntilContextCancel(ctx, 200*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if !n.kubelet.Running() {
			return false, errors.New("kubelet exited")
		}
		node, err := n.c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			// Not found: kubelet has not registered the node yet.
			lastErr = err
			return false, nil //nolint:nilerr // retried until ctx ends; lastErr says why
		}
		switch {
		case n.spec.NetworkNamespace && node.Spec.PodCIDR == "":
			if _, err := n.c.Client.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, cidrPatch, metav1.PatchOptions{}); err != nil {
				lastErr = err
				return false, nil //nolint:nilerr // retried until ctx ends; lastErr says why
			}
		case n.spec.NetworkNamespace && node.Spec.PodCIDR != n.net.podCIDR:
			return false, fmt.Errorf("node %s has pod CIDR %s, its bridge serves %s (a Node object left from another node?)",
				n.Name, node.Spec.PodCIDR, n.net.podCIDR)
		case !n.spec.NetworkNamespace && (len(node.Status.Addresses) != 1 || node.Status.Addresses[0].Address != "127.0.0.1"):
			// A merge patch replaces the list; a strategic one would merge into it.
			if _, err := n.c.Client.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, addrPatch,
				metav1.PatchOptions{}, "status"); err != nil {
				lastErr = err
				return false, nil //nolint:nilerr // retried until ctx ends; lastErr says why
			}
		}
		return NodeReady(node), nil
	})
	if err != nil && lastErr != nil {
		return fmt.Errorf("%w (last API error: %w)", err, lastErr)
	}
	return err
}

// Stop stops kubelet, every container, containerd, and removes the node's
// cgroups, mounts and bridge. Safe to call more than once; the cluster's
// Stop calls it.
func (n *RealNode) Stop() {
	if n.kubeProxy != nil {
		_ = n.kubeProxy.Stop()
	}
	if n.kubelet != nil {
		_ = n.kubelet.Stop()
	}
	if n.containerd != nil {
		_ = n.containerd.Stop()
	}
	cleanupNodeLeftovers(n.Dir, n.id, n.CgroupRoot, n.bridge)
	if n.ipForward != "" && readTrimmed("/proc/sys/net/ipv4/ip_forward") != n.ipForward {
		_ = os.WriteFile("/proc/sys/net/ipv4/ip_forward", []byte(n.ipForward), 0o644)
	}
}
