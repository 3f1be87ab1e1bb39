package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/kube-reclaim/kube-reclaim/internal/policyinput"
	"github.com/kube-reclaim/kube-reclaim/policy"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/stack"
)

type rssConfig struct {
	nodes, podsPerNode int
	observe            time.Duration
	publisherQPS       int
}

func (c *rssConfig) flags(fs *flag.FlagSet) {
	fs.IntVar(&c.nodes, "rss-nodes", 5000, "nodes served by the fake API")
	fs.IntVar(&c.podsPerNode, "rss-pods-per-node", 30, "pods per node (5 of them reclaimed)")
	// Long enough for the publisher's usage history to fill: watched for
	// less, its RSS is below what it holds in steady state.
	// The first cycle writes every node, and every refresh rewrites them
	// all as fast: at a high rate that is one burst of writes and of node
	// watch events, whose garbage makes both processes' peak (the figures
	// are in docs/benchmarks.md, P4). As deployed, the rate spreads them out.
	fs.IntVar(&c.publisherQPS, "rss-publisher-qps", 0, "the publisher's --kube-api-qps (burst twice that); 0 keeps the deployed rate, under which the first cycle's writes take 100 s at 5000 nodes")
	fs.DurationVar(&c.observe, "rss-observe", fullHistory()+time.Minute, "how long both processes are watched once ready (the publisher's usage history fills in "+fullHistory().String()+" at the defaults)")
}

// fullHistory is how long the publisher keeps usage samples at the defaults
// (policyinput.HistoryAge).
func fullHistory() time.Duration {
	return policyinput.HistoryAge(policy.Default(), reclaimable.DefaultMetricsStaleAfter)
}

// benchRole is a kube-reclaim role to start, with the ports of its health
// and metrics servers and the environment deploy/ gives it.
type benchRole struct {
	role    string
	health  int
	args    []string
	env     []string
	metrics int
}

// deployedRoles writes deploy/default's policy into dir and returns the
// publisher (first; without leader election, publisherExtra appended) and
// the extender (without the publisher lease check) with deploy/default's
// arguments and environment against kubeconfig, serving on free loopback
// ports.
func deployedRoles(dir, kubeconfig string, publisherExtra ...string) ([]benchRole, error) {
	dep, err := stack.LoadDeployed("default")
	if err != nil {
		return nil, err
	}
	policyFile := filepath.Join(dir, "policy.yaml")
	if err := os.WriteFile(policyFile, []byte(dep.Policy), 0o644); err != nil {
		return nil, err
	}
	ports := make([]int, 5)
	for i := range ports {
		if ports[i], err = cluster.FreePort(); err != nil {
			return nil, err
		}
	}
	pubHealth, extHealth, extListen, pubMetrics, extMetrics := ports[0], ports[1], ports[2], ports[3], ports[4]
	pub := append(append([]string{stack.Publisher, "--kubeconfig=" + kubeconfig}, dep.Args[stack.Publisher]...),
		"--config="+policyFile, fmt.Sprintf("--health-address=127.0.0.1:%d", pubHealth), "--leader-elect=false",
		fmt.Sprintf("--metrics-address=127.0.0.1:%d", pubMetrics))
	ext := append(append([]string{stack.Extender, "--kubeconfig=" + kubeconfig}, dep.Args[stack.Extender]...),
		fmt.Sprintf("--listen-address=127.0.0.1:%d", extListen), fmt.Sprintf("--health-address=127.0.0.1:%d", extHealth), "--publisher-lease-name=",
		fmt.Sprintf("--metrics-address=127.0.0.1:%d", extMetrics))
	return []benchRole{{stack.Publisher, pubHealth, append(pub, publisherExtra...), dep.Env[stack.Publisher], pubMetrics},
		{stack.Extender, extHealth, ext, dep.Env[stack.Extender], extMetrics}}, nil
}

// procStats is what /proc says about one process.
type procStats struct {
	RSSMB, PeakMB float64 // VmRSS, VmHWM
	AnonMB        float64 // RssAnon: RSS without the mapped binary
	CPU           time.Duration
}

type processResult struct {
	Role         string  `json:"role"`
	ReadySeconds float64 `json:"readySeconds"`
	// RSSMB at the end of the observation, MaxRSSMB the highest sampled
	// once ready, PeakMB the kernel's high-water mark (start-up included).
	RSSMB    float64 `json:"rssMB"`
	AnonMB   float64 `json:"anonMB"`
	MaxRSSMB float64 `json:"maxRssMB"`
	PeakMB   float64 `json:"peakMB"`
	// LiveHeapMB is the heap left by the last garbage collection during the
	// observation (GODEBUG=gctrace=1; -1: none ran): what the process really
	// holds, however much freed memory the Go runtime has not returned to
	// the kernel yet. The runtime collects at least every 2 minutes.
	LiveHeapMB float64 `json:"liveHeapMB"`
}

type rssResult struct {
	Nodes     int             `json:"nodes"`
	Pods      int             `json:"pods"`
	Processes []processResult `json:"processes"`
	// SumRSSMB is publisher + extender RSS at the end.
	SumRSSMB float64 `json:"sumRssMB"`
	// Publisher cycles during the observation and its process CPU per cycle
	// (metrics read as JSON from the fake API, informers, writes if any).
	PublisherCycles      int            `json:"publisherCycles"`
	PublisherCPUPerCycle float64        `json:"publisherCpuSecondsPerCycle"`
	PublisherWrites      int            `json:"publisherWritesDuringObservation"`
	Requests             map[string]int `json:"requests"`
	// ObserveSeconds is how long both processes were watched once ready.
	ObserveSeconds float64 `json:"observeSeconds"`
	// PublisherQPS is the publisher's --kube-api-qps; 0: the deployed one.
	PublisherQPS int `json:"publisherQps,omitempty"`
}

// runRSS is `bench rss`: the publisher and the extender as real processes,
// configured as deploy/default configures them, against a fake API server
// holding the whole cluster in memory.
func runRSS(ctx context.Context, cfg rssConfig, out io.Writer) (*rssResult, error) {
	start := time.Now()
	step := func(format string, args ...any) {
		fmt.Fprintf(out, "[%6.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	pods := cfg.nodes * cfg.podsPerNode
	step("P4 memory: publisher and extender processes against a fake API server with %d nodes and %d pods", cfg.nodes, pods)
	tmp, err := os.MkdirTemp("", "kube-reclaim-bench-rss-")
	if err != nil {
		return nil, err
	}
	if os.Getenv("KUBE_RECLAIM_BENCH_KEEP") == "" {
		defer os.RemoveAll(tmp)
	} else {
		step("keeping the logs in %s (KUBE_RECLAIM_BENCH_KEEP is set)", tmp)
	}
	bin, err := stack.BuildBinary(ctx, tmp)
	if err != nil {
		return nil, err
	}
	api, err := newFakeAPI(cfg.nodes, cfg.podsPerNode, min(5, cfg.podsPerNode))
	if err != nil {
		return nil, err
	}
	if err := api.start(ctx); err != nil {
		return nil, err
	}
	defer api.stop()
	step("fake API serving %s (pod list: %.0f MB JSON, %.0f MB protobuf)", api.url, float64(len(api.podJSON))/1e6, float64(len(api.podProto))/1e6)
	kc := clientcmdapi.NewConfig()
	kc.Clusters["fake"] = &clientcmdapi.Cluster{Server: api.url}
	kc.AuthInfos["fake"] = &clientcmdapi.AuthInfo{}
	kc.Contexts["fake"] = &clientcmdapi.Context{Cluster: "fake", AuthInfo: "fake"}
	kc.CurrentContext = "fake"
	kubeconfig := filepath.Join(tmp, "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kubeconfig); err != nil {
		return nil, err
	}
	var rate []string
	qps := "deployed --kube-api-qps"
	if cfg.publisherQPS > 0 {
		rate = []string{fmt.Sprintf("--kube-api-qps=%d", cfg.publisherQPS), fmt.Sprintf("--kube-api-burst=%d", 2*cfg.publisherQPS)}
		qps = rate[0]
	}
	roles, err := deployedRoles(tmp, kubeconfig, rate...)
	if err != nil {
		return nil, err
	}
	procs := make([]*exec.Cmd, len(roles))
	defer func() {
		for _, p := range procs {
			stopProcess(p)
		}
	}()
	for i, r := range roles {
		logf, err := os.Create(filepath.Join(tmp, r.role+".log"))
		if err != nil {
			return nil, err
		}
		defer logf.Close()
		cmd := exec.CommandContext(ctx, bin, r.args...)
		cmd.Stdout, cmd.Stderr = logf, logf
		cmd.Env = append(append(os.Environ(), r.env...), "GODEBUG=gctrace=1")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		// On cancellation stop the whole process group as stopProcess does,
		// not just the leader with SIGKILL.
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM) }
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		procs[i] = cmd
	}
	step("started kube-reclaim publisher and extender with deploy/default's arguments and environment (publisher without leader election and with %s, extender without the lease check)", qps)
	res := &rssResult{Nodes: cfg.nodes, Pods: pods, PublisherQPS: cfg.publisherQPS}
	for i, r := range roles {
		if err := waitHTTPOK(ctx, procs[i], fmt.Sprintf("http://127.0.0.1:%d/readyz", r.health), 10*time.Minute); err != nil {
			b, _ := os.ReadFile(filepath.Join(tmp, r.role+".log"))
			return nil, fmt.Errorf("%s: %w\n%s", r.role, err, lastBytes(b, 3000))
		}
		res.Processes = append(res.Processes, processResult{Role: r.role, ReadySeconds: time.Since(start).Seconds()})
		step("%s ready", r.role)
	}
	// Only collections after start-up say what the processes hold in
	// steady state: remember where the logs are now.
	logOffsets := make([]int64, len(roles))
	for i, r := range roles {
		if st, err := os.Stat(filepath.Join(tmp, r.role+".log")); err == nil {
			logOffsets[i] = st.Size()
		}
	}
	// The fake API authenticates and authorizes any token.
	pubMetrics := metricsTarget{url: fmt.Sprintf("https://127.0.0.1:%d/metrics", roles[0].metrics), token: "bench"}
	cycles0, writes0, _ := publisherCounters(ctx, pubMetrics)
	cpu0 := make([]time.Duration, len(procs))
	for i, p := range procs {
		if s, err := readProcStats(p.Process.Pid); err == nil {
			cpu0[i] = s.CPU
		}
	}
	observed := time.Now()
	deadline := observed.Add(cfg.observe)
	for time.Now().Before(deadline) {
		for i, p := range procs {
			s, err := readProcStats(p.Process.Pid)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", roles[i].role, err)
			}
			pr := &res.Processes[i]
			pr.RSSMB, pr.PeakMB, pr.AnonMB = s.RSSMB, s.PeakMB, s.AnonMB
			pr.MaxRSSMB = max(pr.MaxRSSMB, s.RSSMB)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(time.Second):
		}
	}
	res.ObserveSeconds = time.Since(observed).Seconds()
	cycles1, writes1, err := publisherCounters(ctx, pubMetrics)
	if err == nil {
		res.PublisherCycles, res.PublisherWrites = int(cycles1-cycles0), int(writes1-writes0)
		if s, err := readProcStats(procs[0].Process.Pid); err == nil && res.PublisherCycles > 0 {
			res.PublisherCPUPerCycle = (s.CPU - cpu0[0]).Seconds() / float64(res.PublisherCycles)
		}
	}
	for i := range res.Processes {
		p := &res.Processes[i]
		res.SumRSSMB += p.RSSMB
		p.LiveHeapMB = -1
		if b, err := os.ReadFile(filepath.Join(tmp, p.Role+".log")); err == nil && int64(len(b)) >= logOffsets[i] {
			if v, ok := lastLiveHeap(string(b[logOffsets[i]:])); ok {
				p.LiveHeapMB = v
			}
		}
	}
	res.Requests = api.requestCounts()
	printRSS(out, res)
	return res, nil
}

func printRSS(out io.Writer, r *rssResult) {
	fmt.Fprintf(out, "\n%-10s %8s %8s %10s %12s %14s %14s\n", "process", "ready s", "RSS MB", "anon MB", "max RSS MB", "peak (HWM) MB", "live heap MB")
	for _, p := range r.Processes {
		fmt.Fprintf(out, "%-10s %8.1f %8.0f %10.0f %12.0f %14.0f %14s\n", p.Role, p.ReadySeconds, p.RSSMB, p.AnonMB, p.MaxRSSMB, p.PeakMB, liveHeap(p.LiveHeapMB))
	}
	fmt.Fprintf(out, "peak RSS at %d nodes / %d pods (goals: publisher %s, extender %s):", r.Nodes, r.Pods, goals.PublisherPeak, goals.ExtenderPeak)
	for _, p := range r.Processes {
		fmt.Fprintf(out, " %s %.0f MB", p.Role, p.PeakMB)
	}
	fmt.Fprintf(out, "; publisher + extender RSS at the end %.0f MB\n", r.SumRSSMB)
	if r.PublisherCycles > 0 {
		fmt.Fprintf(out, "publisher process: %d cycles while observed, %.2f s CPU per cycle, %d writes\n", r.PublisherCycles, r.PublisherCPUPerCycle, r.PublisherWrites)
	}
	keys := make([]string, 0, len(r.Requests))
	for k := range r.Requests {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, 0, len(keys))
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s: %d", k, r.Requests[k]))
	}
	fmt.Fprintf(out, "fake API requests: %s\n", strings.Join(parts, ", "))
}

func lastBytes(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// waitHTTPOK polls url until it answers 200, the process exits, or timeout.
func waitHTTPOK(ctx context.Context, p *exec.Cmd, url string, timeout time.Duration) error {
	return pollOK(ctx, url, timeout, 500*time.Millisecond, func() error {
		if p.ProcessState != nil || syscall.Kill(p.Process.Pid, 0) != nil {
			return errors.New("process exited")
		}
		return nil
	})
}

// pollOK polls url every interval until it answers 200, alive reports an
// error, ctx ends, or timeout passes.
func pollOK(ctx context.Context, url string, timeout, interval time.Duration, alive func() error) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if err := alive(); err != nil {
			return err
		}
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if res, err := http.DefaultClient.Do(req); err == nil {
			res.Body.Close()
			if res.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(interval):
		}
	}
	return fmt.Errorf("%s not OK within %s", url, timeout)
}

func stopProcess(p *exec.Cmd) {
	if p == nil || p.Process == nil {
		return
	}
	_ = syscall.Kill(-p.Process.Pid, syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = p.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
		<-done
	}
}

// readProcStats reads VmRSS, VmHWM, RssAnon and the CPU time of a process.
func readProcStats(pid int) (procStats, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return procStats{}, err
	}
	status, err := p.NewStatus()
	if err != nil {
		return procStats{}, err
	}
	stat, err := p.Stat()
	if err != nil {
		return procStats{}, err
	}
	return procStats{RSSMB: float64(status.VmRSS) / 1e6, PeakMB: float64(status.VmHWM) / 1e6, AnonMB: float64(status.RssAnon) / 1e6,
		CPU: time.Duration(stat.CPUTime() * float64(time.Second))}, nil
}

// publisherCounters reads the publisher's cycle count and write count from
// its /metrics.
func publisherCounters(ctx context.Context, target metricsTarget) (cycles, writes float64, err error) {
	families, err := scrape(ctx, target)
	if err != nil {
		return 0, 0, err
	}
	return histogramCount(families, "kube_reclaim_publisher_cycle_duration_seconds"), sumCounters(families, "kube_reclaim_publisher_writes_total"), nil
}

// gcLine matches the heap sizes of a GODEBUG=gctrace=1 line:
// "gc 18 @295.827s 3%: ... ms cpu, 1567->1823->1031 MB, 1837 MB goal, ...".
var gcLine = regexp.MustCompile(`^gc \d+ @.* (\d+)->(\d+)->(\d+) MB`)

// lastLiveHeap returns the live heap (MB) after the last collection logged.
func lastLiveHeap(log string) (float64, bool) {
	lines := strings.Split(log, "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		if m := gcLine.FindStringSubmatch(lines[i]); m != nil {
			v, err := strconv.ParseFloat(m[3], 64)
			return v, err == nil
		}
	}
	return 0, false
}

func liveHeap(mb float64) string {
	if mb < 0 {
		return "n/a"
	}
	return strconv.FormatFloat(mb, 'f', 0, 64)
}
