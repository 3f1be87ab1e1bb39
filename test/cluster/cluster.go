// Package cluster runs a real, local Kubernetes control plane for integration
// tests, end-to-end tests, benchmarks and the demo: etcd, kube-apiserver,
// kube-controller-manager and kube-scheduler v1.34.4, kwok as the kubelet of
// every node, and metrics-server serving metrics.k8s.io. Binaries are built
// from the Go module proxy on first use and cached (see EnsureBinaries).
// AddRealNode adds real nodes beside the kwok ones: kubelet with its own
// containerd and runc, for what only a real kubelet does (status
// recomputation, registration, admission, cgroup limits); with
// RealNodeSpec.NetworkNamespace each is a machine of its own on the
// network, with kube-proxy, so Services and in-cluster configuration work.
package cluster

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
)

// Options configure a cluster. The zero value is a sensible default.
type Options struct {
	// HeartbeatInterval is how often kwok patches nodes/status, like a
	// kubelet's nodeStatusUpdateFrequency (default 10s, plus up to half as jitter).
	HeartbeatInterval time.Duration
	// NodeLeaseSeconds is the node Lease duration kwok keeps (default 40).
	NodeLeaseSeconds int
	// MetricResolution is metrics-server's scrape interval (default 15s).
	MetricResolution time.Duration
	// NoScheduler leaves kube-scheduler stopped (start it with StartScheduler).
	NoScheduler bool
	// SchedulerBinary runs another kube-scheduler build in kube-scheduler's
	// place, with the same flags and configuration, for example the
	// kube-reclaim-scheduler of EnsurePluginScheduler. Empty: the cached
	// upstream kube-scheduler.
	SchedulerBinary string
	// SchedulerConfig is extra top-level KubeSchedulerConfiguration YAML, for
	// example an `extenders:` list.
	SchedulerConfig string
	// NoMetricsServer leaves metrics-server stopped.
	NoMetricsServer bool
	// AuditPolicy, when set, enables the apiserver audit log with this policy
	// YAML; AuditLogPath() then names the log file.
	AuditPolicy string
	// EndpointRouting makes the apiserver call webhooks and aggregated APIs
	// backed by a Service at one of the Service's endpoints (pod IPs, which
	// the host routes to nodes in network namespaces) rather than at its
	// ClusterIP, which only kube-proxy inside those namespaces serves; a
	// real control-plane machine runs kube-proxy itself (--enable-aggregator-routing).
	EndpointRouting bool
	// Log receives progress lines (building, starting, ready). Nil: discarded.
	Log io.Writer
}

func (o *Options) defaults() {
	if o.HeartbeatInterval == 0 {
		o.HeartbeatInterval = 10 * time.Second
	}
	if o.NodeLeaseSeconds == 0 {
		o.NodeLeaseSeconds = 40
	}
	if o.MetricResolution == 0 {
		o.MetricResolution = 15 * time.Second
	}
	if o.Log == nil {
		o.Log = io.Discard
	}
}

// Cluster is a running local control plane.
type Cluster struct {
	opts Options
	dir  string
	bins *Binaries
	ca   *CA

	apiPort, etcdPort, kwokPort, metricsPort int
	// schedulerPort is kube-scheduler's secure port, new on every start.
	schedulerPort atomic.Int32
	kubeconfig    string
	restConfig    *rest.Config

	// Client, Dynamic and Metrics are admin clients of the cluster.
	Client  kubernetes.Interface
	Dynamic dynamic.Interface
	Metrics metricsclient.Interface

	mu    sync.Mutex
	procs map[string]*Process
	// started lists every process ever started, for Stop and StartedPIDs.
	started []*Process
	pids    []int
	stopped bool
	// realNodes are stopped before the control plane (AddRealNode).
	realNodes []*RealNode
	// apiRelay serves the API at APIAddress for nodes in network
	// namespaces (serveAPIOnNodeNetwork).
	apiRelay net.Listener
}

// Component names accepted by Process, StopComponent and StartComponent.
const (
	Etcd              = "etcd"
	APIServer         = "kube-apiserver"
	ControllerManager = "kube-controller-manager"
	Scheduler         = "kube-scheduler"
	Kwok              = "kwok"
	MetricsServer     = "metrics-server"
)

const adminToken = "kube-reclaim-test-admin-token"

// Start builds (if needed) and starts every component and waits until the
// API is usable: nodes can be added and pods created. Stop must be called
// (Start cleans up itself when it fails).
func Start(ctx context.Context, opts Options) (c *Cluster, err error) {
	opts.defaults()
	bins, err := EnsureBinaries(ctx, opts.Log)
	if err != nil {
		return nil, err
	}
	dir, err := makeTempDir()
	if err != nil {
		return nil, err
	}
	c = &Cluster{opts: opts, dir: dir, bins: bins, procs: map[string]*Process{}}
	defer func() {
		if err != nil {
			err = fmt.Errorf("%w%s", err, c.logTails())
			c.Stop()
			c = nil
		}
	}()
	start := time.Now()
	if err = c.writeFiles(); err != nil {
		return c, err
	}
	if err = c.start(Etcd); err != nil {
		return c, err
	}
	if err = c.start(APIServer); err != nil {
		return c, err
	}
	if err = c.waitAPI(ctx); err != nil {
		return c, err
	}
	fmt.Fprintf(opts.Log, "cluster: kube-apiserver ready after %s\n", time.Since(start).Round(time.Millisecond))
	if err = c.installKwokCRDs(ctx); err != nil {
		return c, err
	}
	for _, name := range []string{ControllerManager, Kwok} {
		if err = c.start(name); err != nil {
			return c, err
		}
	}
	if !opts.NoScheduler {
		if err = c.start(Scheduler); err != nil {
			return c, err
		}
	}
	if !opts.NoMetricsServer {
		if err = c.registerMetricsAPI(ctx); err != nil {
			return c, err
		}
		if err = c.start(MetricsServer); err != nil {
			return c, err
		}
	}
	if err = c.waitUsable(ctx); err != nil {
		return c, err
	}
	fmt.Fprintf(opts.Log, "cluster: ready after %s (kubeconfig %s)\n", time.Since(start).Round(time.Millisecond), c.kubeconfig)
	return c, nil
}

// Dir is the cluster's temporary directory (logs, certificates, data).
func (c *Cluster) Dir() string { return c.dir }

// Kubeconfig is the path of an admin kubeconfig.
func (c *Cluster) Kubeconfig() string { return c.kubeconfig }

// RESTConfig returns a copy of the admin REST configuration.
func (c *Cluster) RESTConfig() *rest.Config { return rest.CopyConfig(c.restConfig) }

// CA is the cluster's certificate authority; tests use it to issue serving
// certificates the apiserver trusts.
func (c *Cluster) CA() *CA { return c.ca }

// Binaries are the programs the cluster runs.
func (c *Cluster) Binaries() *Binaries { return c.bins }

// AuditLogPath is the audit log file (empty unless Options.AuditPolicy).
func (c *Cluster) AuditLogPath() string {
	if c.opts.AuditPolicy == "" {
		return ""
	}
	return filepath.Join(c.dir, "audit.log")
}

// Process returns a component's process (nil when unknown).
func (c *Cluster) Process(name string) *Process {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.procs[name]
}

// StartedPIDs returns the pid of every process the cluster has started.
func (c *Cluster) StartedPIDs() []int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]int(nil), c.pids...)
}

// The ports handed out come from below the kernel's ephemeral range
// (net.ipv4.ip_local_port_range, 32768 and up by default). The caller binds
// a port later, often in another process; a port from the ephemeral range
// can meanwhile become the local end of any outgoing connection on the
// machine, and a busy machine makes thousands of them (every component talks
// to the apiserver). Outside the range only another listener can take it.
const (
	portsFrom = 20000
	portsTo   = 32767
)

var handedOut struct {
	sync.Mutex
	ports map[int]bool
}

func freePort() (int, error) {
	handedOut.Lock()
	defer handedOut.Unlock()
	if handedOut.ports == nil {
		handedOut.ports = map[int]bool{}
	}
	// Start at a random place, so that test binaries running side by side
	// rarely try the same ports; never hand a port out twice in a process.
	start := rand.IntN(portsTo - portsFrom + 1)
	for i := range portsTo - portsFrom + 1 {
		port := portsFrom + (start+i)%(portsTo-portsFrom+1)
		if handedOut.ports[port] {
			continue
		}
		l, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue // taken
		}
		if err := l.Close(); err != nil {
			return 0, err
		}
		handedOut.ports[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("no free loopback port in %d-%d", portsFrom, portsTo)
}

// FreePort returns a loopback port that was free a moment ago, outside the
// kernel's ephemeral range and not handed out before by this process.
func FreePort() (int, error) { return freePort() }

func (c *Cluster) writeFiles() error {
	var err error
	ports := []*int{&c.apiPort, &c.etcdPort, &c.kwokPort, &c.metricsPort}
	for _, p := range ports {
		if *p, err = freePort(); err != nil {
			return err
		}
	}
	if c.ca, err = NewCA("kube-reclaim-test-ca"); err != nil {
		return err
	}
	front, err := NewCA("kube-reclaim-test-front-proxy-ca")
	if err != nil {
		return err
	}
	write := func(name string, data []byte) string {
		p := filepath.Join(c.dir, name)
		if err == nil {
			err = os.WriteFile(p, data, 0o600)
		}
		return p
	}
	write("ca.crt", c.ca.CertPEM)
	write("front-proxy-ca.crt", front.CertPEM)
	write("tokens.csv", []byte(adminToken+",admin,admin,system:masters\n"))
	if err != nil {
		return err
	}
	issue := func(ca *CA, name string, spec CertSpec) {
		if err != nil {
			return
		}
		var kp *KeyPair
		if kp, err = ca.Issue(spec); err == nil {
			_, _, err = kp.Write(c.dir, name)
		}
	}
	// Nodes in network namespaces reach the apiserver at APIAddress, their
	// pods at the kubernetes Service's ClusterIP.
	issue(c.ca, "apiserver", CertSpec{CommonName: "kube-apiserver", Server: true,
		Hosts: []string{"127.0.0.1", APIAddress, KubernetesServiceIP, "localhost", "kubernetes", "kubernetes.default",
			"kubernetes.default.svc", "kubernetes.default.svc.cluster.local"}})
	issue(front, "front-proxy-client", CertSpec{CommonName: "front-proxy-client", Client: true})
	issue(c.ca, "metrics-server", CertSpec{CommonName: "metrics-server", Server: true,
		Hosts: []string{"127.0.0.1", "localhost", "metrics-server.kube-system.svc"}})
	issue(c.ca, "kwok", CertSpec{CommonName: "kwok", Server: true, Hosts: []string{"127.0.0.1", "localhost"}})
	if err != nil {
		return err
	}
	if _, _, err = writeSigningKey(c.dir); err != nil {
		return err
	}
	if c.opts.AuditPolicy != "" {
		write("audit-policy.yaml", []byte(c.opts.AuditPolicy))
	}
	write("kwok.yaml", []byte(kwokConfig(c.opts.HeartbeatInterval, c.opts.NodeLeaseSeconds)))
	if err != nil {
		return err
	}
	c.kubeconfig = filepath.Join(c.dir, "admin.kubeconfig")
	server := fmt.Sprintf("https://127.0.0.1:%d", c.apiPort)
	if err = writeKubeconfig(c.kubeconfig, server, c.ca.CertPEM, "admin", &clientcmdapi.AuthInfo{Token: adminToken}); err != nil {
		return err
	}
	if c.restConfig, err = clientcmd.BuildConfigFromFlags("", c.kubeconfig); err != nil {
		return err
	}
	// Tests create hundreds of objects at once; client-go's default 5 QPS would
	// make the harness, not the system under test, the bottleneck.
	c.restConfig.QPS, c.restConfig.Burst = 500, 1000
	if c.Client, err = kubernetes.NewForConfig(c.restConfig); err != nil {
		return err
	}
	if c.Dynamic, err = dynamic.NewForConfig(c.restConfig); err != nil {
		return err
	}
	c.Metrics, err = metricsclient.NewForConfig(c.restConfig)
	return err
}

func (c *Cluster) args(name string) ([]string, string, error) {
	f := func(n string) string { return filepath.Join(c.dir, n) }
	switch name {
	case Etcd:
		peer, err := freePort()
		if err != nil {
			return nil, "", err
		}
		client := fmt.Sprintf("http://127.0.0.1:%d", c.etcdPort)
		peerURL := fmt.Sprintf("http://127.0.0.1:%d", peer)
		return []string{
			"--name=default", "--data-dir=" + f("etcd"),
			"--listen-client-urls=" + client, "--advertise-client-urls=" + client,
			"--listen-peer-urls=" + peerURL, "--initial-advertise-peer-urls=" + peerURL,
			"--initial-cluster=default=" + peerURL,
			// Test data is thrown away: skip fsync, keep the machine's disk out of the picture.
			"--unsafe-no-fsync", "--quota-backend-bytes=4294967296", "--log-level=warn",
		}, c.bins.Etcd, nil
	case APIServer:
		a := []string{
			fmt.Sprintf("--etcd-servers=http://127.0.0.1:%d", c.etcdPort),
			fmt.Sprintf("--secure-port=%d", c.apiPort),
			"--bind-address=127.0.0.1", "--advertise-address=127.0.0.1",
			"--tls-cert-file=" + f("apiserver.crt"), "--tls-private-key-file=" + f("apiserver.key"),
			"--client-ca-file=" + f("ca.crt"),
			"--token-auth-file=" + f("tokens.csv"),
			// As a real control plane: kubelets (system:node:NAME in
			// system:nodes) are judged by the Node authorizer and the
			// NodeRestriction admission plugin (added to the default
			// plugins, which include ValidatingAdmissionPolicy). Clients
			// holding the admin token or system:masters pass RBAC as before;
			// the real-node kubelets' certificates name system:nodes, so
			// NodeRestriction limits them to their own Node and pods, as a
			// real kubelet.
			"--authorization-mode=Node,RBAC",
			"--enable-admission-plugins=NodeRestriction",
			"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
			"--service-account-key-file=" + f("sa.pub"),
			"--service-account-signing-key-file=" + f("sa.key"),
			"--service-cluster-ip-range=" + ServiceCIDR,
			// Node addresses, never names: a real node in a network namespace
			// also reports its hostname, which only outside DNS would resolve.
			"--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
			// The apiserver cannot publish a loopback endpoint for the kubernetes Service.
			"--endpoint-reconciler-type=none",
			"--requestheader-client-ca-file=" + f("front-proxy-ca.crt"),
			"--requestheader-allowed-names=front-proxy-client",
			"--requestheader-username-headers=X-Remote-User",
			"--requestheader-group-headers=X-Remote-Group",
			"--requestheader-extra-headers-prefix=X-Remote-Extra-",
			"--proxy-client-cert-file=" + f("front-proxy-client.crt"),
			"--proxy-client-key-file=" + f("front-proxy-client.key"),
			"--max-requests-inflight=1000", "--max-mutating-requests-inflight=500",
		}
		if c.opts.EndpointRouting {
			a = append(a, "--enable-aggregator-routing=true")
		}
		if c.opts.AuditPolicy != "" {
			a = append(a, "--audit-policy-file="+f("audit-policy.yaml"), "--audit-log-path="+f("audit.log"),
				"--audit-log-mode=batch", "--audit-log-batch-max-wait=1s", "--audit-log-maxsize=0")
		}
		return a, c.bins.APIServer, nil
	case ControllerManager:
		port, err := freePort()
		if err != nil {
			return nil, "", err
		}
		return []string{
			"--kubeconfig=" + c.kubeconfig,
			"--authentication-kubeconfig=" + c.kubeconfig, "--authorization-kubeconfig=" + c.kubeconfig,
			"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port),
			"--leader-elect=false",
			"--service-account-private-key-file=" + f("sa.key"), "--root-ca-file=" + f("ca.crt"),
			"--use-service-account-credentials=false",
			"--kube-api-qps=200", "--kube-api-burst=400",
		}, c.bins.ControllerManager, nil
	case Scheduler:
		port, err := freePort()
		if err != nil {
			return nil, "", err
		}
		c.schedulerPort.Store(int32(port))
		cfg := fmt.Sprintf(`apiVersion: kubescheduler.config.k8s.io/v1
kind: KubeSchedulerConfiguration
clientConnection:
  kubeconfig: %s
  qps: 500
  burst: 1000
leaderElection:
  leaderElect: false
%s
`, c.kubeconfig, c.opts.SchedulerConfig)
		if err := os.WriteFile(f("scheduler.yaml"), []byte(cfg), 0o600); err != nil {
			return nil, "", err
		}
		return []string{
			"--config=" + f("scheduler.yaml"),
			"--authentication-kubeconfig=" + c.kubeconfig, "--authorization-kubeconfig=" + c.kubeconfig,
			"--bind-address=127.0.0.1", fmt.Sprintf("--secure-port=%d", port),
		}, cmp.Or(c.opts.SchedulerBinary, c.bins.Scheduler), nil
	case Kwok:
		return []string{
			"--kubeconfig=" + c.kubeconfig, "--config=" + f("kwok.yaml"),
			"--manage-all-nodes=false", "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
			"--node-ip=127.0.0.1", fmt.Sprintf("--node-port=%d", c.kwokPort),
			fmt.Sprintf("--server-address=127.0.0.1:%d", c.kwokPort),
			"--tls-cert-file=" + f("kwok.crt"), "--tls-private-key-file=" + f("kwok.key"),
			"--enable-crds=ResourceUsage,ClusterResourceUsage",
		}, c.bins.Kwok, nil
	case MetricsServer:
		return []string{
			fmt.Sprintf("--secure-port=%d", c.metricsPort), "--bind-address=127.0.0.1",
			"--kubeconfig=" + c.kubeconfig,
			"--authentication-kubeconfig=" + c.kubeconfig, "--authorization-kubeconfig=" + c.kubeconfig,
			"--tls-cert-file=" + f("metrics-server.crt"), "--tls-private-key-file=" + f("metrics-server.key"),
			"--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
			"--kubelet-use-node-status-port", "--kubelet-insecure-tls",
			"--metric-resolution=" + c.opts.MetricResolution.String(),
			// metrics-server insists the scrape timeout is below the resolution.
			"--kubelet-request-timeout=" + min(10*time.Second, c.opts.MetricResolution/2).String(),
		}, c.bins.MetricsServer, nil
	}
	return nil, "", fmt.Errorf("unknown component %q", name)
}

func (c *Cluster) start(name string) error {
	args, bin, err := c.args(name)
	if err != nil {
		return err
	}
	return c.StartProcess(name, bin, args...)
}

// StartProcess runs any program under the cluster's supervision: it is
// logged to <Dir>/<name>.log and stopped by Stop. Tests use it to run the
// kube-reclaim roles as real processes.
func (c *Cluster) StartProcess(name, path string, args ...string) error {
	return c.StartProcessWithEnv(name, path, nil, args...)
}

// StartProcessWithEnv is StartProcess with env (NAME=value) added to the
// process's environment.
func (c *Cluster) StartProcessWithEnv(name, path string, env []string, args ...string) error {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return errors.New("cluster is stopped")
	}
	p := c.procs[name]
	if p == nil {
		p = &Process{Name: name, LogFile: filepath.Join(c.dir, name+".log")}
		c.procs[name] = p
		c.started = append(c.started, p)
	}
	p.Path, p.Args, p.Env = path, args, env
	c.mu.Unlock()
	if err := p.Start(); err != nil {
		return err
	}
	c.mu.Lock()
	c.pids = append(c.pids, p.PID())
	c.mu.Unlock()
	return nil
}

// StopComponent stops a component gracefully; KillComponent as a crash would.
func (c *Cluster) StopComponent(name string) error { return c.withProc(name, (*Process).Stop) }

// KillComponent sends SIGKILL to a component.
func (c *Cluster) KillComponent(name string) error { return c.withProc(name, (*Process).Kill) }

// StartComponent starts a stopped control-plane component again with the same
// arguments it was started with.
func (c *Cluster) StartComponent(name string) error {
	p := c.Process(name)
	if p == nil {
		return c.start(name)
	}
	if err := p.Start(); err != nil {
		return err
	}
	c.mu.Lock()
	c.pids = append(c.pids, p.PID())
	c.mu.Unlock()
	return nil
}

// StartScheduler (re)starts kube-scheduler with extra configuration YAML.
func (c *Cluster) StartScheduler(config string) error {
	if p := c.Process(Scheduler); p != nil {
		_ = p.Stop()
	}
	c.mu.Lock()
	c.opts.SchedulerConfig = config
	c.mu.Unlock()
	return c.start(Scheduler)
}

func (c *Cluster) withProc(name string, f func(*Process) error) error {
	p := c.Process(name)
	if p == nil {
		return fmt.Errorf("no process %q", name)
	}
	return f(p)
}

// Stop stops every process the cluster started and removes its directory.
// It is safe to call more than once.
func (c *Cluster) Stop() {
	c.mu.Lock()
	if c.stopped {
		c.mu.Unlock()
		return
	}
	c.stopped = true
	procs := append([]*Process(nil), c.started...)
	nodes := append([]*RealNode(nil), c.realNodes...)
	c.mu.Unlock()
	// Real nodes first, while the apiserver still answers kubelet.
	for _, n := range nodes {
		n.Stop()
	}
	c.mu.Lock()
	if c.apiRelay != nil {
		_ = c.apiRelay.Close()
	}
	c.mu.Unlock()
	// Reverse start order: clients before the apiserver, the apiserver before etcd.
	var wg sync.WaitGroup
	for i := len(procs) - 1; i >= 0; i-- {
		p := procs[i]
		if p.Name == APIServer || p.Name == Etcd {
			continue
		}
		wg.Add(1)
		go func() { defer wg.Done(); _ = p.Stop() }()
	}
	wg.Wait()
	for _, name := range []string{APIServer, Etcd} {
		if p := c.Process(name); p != nil {
			_ = p.Stop()
		}
	}
	cleanupClusterDir(c.dir)
	if os.Getenv("KUBE_RECLAIM_KEEP_CLUSTER_DIR") == "" {
		_ = os.RemoveAll(c.dir)
	}
	forgetTempDir(c.dir)
}

// logTails returns the end of every component log, for error messages.
func (c *Cluster) logTails() string {
	c.mu.Lock()
	procs := append([]*Process(nil), c.started...)
	c.mu.Unlock()
	var b strings.Builder
	for _, p := range procs {
		fmt.Fprintf(&b, "\n----- %s (last lines of %s) -----\n%s", p.Name, p.LogFile, p.Tail(2000))
	}
	return b.String()
}

// LogTails returns the last lines of every process's log (for test failures).
func (c *Cluster) LogTails() string { return c.logTails() }

func (c *Cluster) waitAPI(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if p := c.Process(APIServer); p != nil && !p.Running() {
			return false, errors.New("kube-apiserver exited")
		}
		body, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && strings.TrimSpace(string(body)) == "ok", nil
	})
}

// waitUsable waits for what tests rely on: the default ServiceAccount (pods
// cannot be created before it exists) and the scheduler's and kwok's health.
func (c *Cluster) waitUsable(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return wait.PollUntilContextCancel(ctx, 100*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		for _, name := range []string{ControllerManager, Kwok, Scheduler, MetricsServer} {
			if p := c.Process(name); p != nil && !p.Running() {
				return false, fmt.Errorf("%s exited", name)
			}
		}
		_, err := c.Client.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return err == nil, nil
	})
}

// APIPort is the kube-apiserver's secure port.
func (c *Cluster) APIPort() int { return c.apiPort }

// MetricsPort is metrics-server's port.
func (c *Cluster) MetricsPort() int { return c.metricsPort }

// SchedulerMetrics returns kube-scheduler's /metrics (Prometheus text).
func (c *Cluster) SchedulerMetrics(ctx context.Context) ([]byte, error) {
	return c.SchedulerGet(ctx, "/metrics")
}

// SchedulerGet returns what kube-scheduler's secure port serves at path
// (with its query), read with the admin token; the scheduler serves a
// self-signed certificate, so it is not verified.
func (c *Cluster) SchedulerGet(ctx context.Context, path string) ([]byte, error) {
	cfg := c.RESTConfig()
	cfg.TLSClientConfig = rest.TLSClientConfig{Insecure: true}
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d%s", c.schedulerPort.Load(), path), nil)
	if err != nil {
		return nil, err
	}
	res, err := hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return nil, err
	}
	if res.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("kube-scheduler %s: %s: %s", path, res.Status, body)
	}
	return body, nil
}
