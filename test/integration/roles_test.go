package integration

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
)

var (
	binOnce sync.Once
	binPath string
	binErr  error
	binDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// kubeReclaim builds cmd/kube-reclaim once per test binary: the roles run as
// real processes, so a test can kill one the way a node failure would.
func kubeReclaim(t testing.TB) string {
	t.Helper()
	binOnce.Do(func() {
		binDir, binErr = os.MkdirTemp("", "kube-reclaim-bin-")
		if binErr != nil {
			return
		}
		root, err := cluster.RepoRoot()
		if err != nil {
			binErr = err
			return
		}
		binPath = filepath.Join(binDir, "kube-reclaim")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/kube-reclaim")
		cmd.Dir = root
		out, err := cmd.CombinedOutput()
		if err != nil {
			binErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if binErr != nil {
		t.Fatal(binErr)
	}
	return binPath
}

// role is a kube-reclaim process started by a test.
type role struct {
	name       string
	healthPort int
	proc       *cluster.Process
}

// startRole runs `kube-reclaim <subcommand> args...` under the cluster, with
// its health server on a free port, and waits for /readyz.
func startRole(t *testing.T, c *cluster.Cluster, name, subcommand string, args ...string) *role {
	t.Helper()
	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	all := append([]string{subcommand, "--kubeconfig=" + c.Kubeconfig(), fmt.Sprintf("--health-address=127.0.0.1:%d", port), "--log-level=debug"}, args...)
	if err := c.StartProcess(name, kubeReclaim(t), all...); err != nil {
		t.Fatal(err)
	}
	r := &role{name: name, healthPort: port, proc: c.Process(name)}
	r.waitReady(t, 60*time.Second)
	return r
}

func (r *role) waitReady(t *testing.T, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if !r.proc.Running() {
			t.Fatalf("%s exited:\n%s", r.name, r.proc.Tail(4000))
		}
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", r.healthPort))
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("%s not ready within %s:\n%s", r.name, timeout, r.proc.Tail(4000))
}

// metric returns the sum of every sample of a Prometheus metric whose labels
// contain all of the given label="value" pairs.
func (r *role) metric(t *testing.T, name string, labels ...string) float64 {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", r.healthPort))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
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
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err == nil {
			sum += v
		}
	}
	return sum
}

var names = reclaimable.MustNames(reclaimable.DefaultDomain)

// published returns the node's annotation (nil when absent or invalid) and
// the reclaimed values in status.capacity and status.allocatable.
func published(t *testing.T, c *cluster.Cluster, node string) (*reclaimable.Annotation, [2]reclaimable.Resources) {
	t.Helper()
	n, err := c.Client.CoreV1().Nodes().Get(context.Background(), node, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var a *reclaimable.Annotation
	if v, ok := n.Annotations[names.Annotation]; ok {
		if parsed, err := reclaimable.Parse(v); err == nil {
			a = &parsed
		}
	}
	get := func(l corev1.ResourceList) reclaimable.Resources {
		return reclaimable.Resources{CPUMilli: l.Name(names.CPU, resource.DecimalSI).Value(), MemoryBytes: l.Name(names.Memory, resource.DecimalSI).Value()}
	}
	return a, [2]reclaimable.Resources{get(n.Status.Capacity), get(n.Status.Allocatable)}
}

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

// podSpec is a pod bound directly to node (no scheduler involved).
func podSpec(ns, name, node string, requests, reclaimed corev1.ResourceList) *corev1.Pod {
	res := corev1.ResourceRequirements{Requests: corev1.ResourceList{}, Limits: corev1.ResourceList{}}
	for k, v := range requests {
		res.Requests[k] = v
	}
	for k, v := range reclaimed {
		res.Requests[k] = v
		res.Limits[k] = v
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox", Resources: res}},
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}}},
	}
}

func mustCreatePod(t *testing.T, c *cluster.Cluster, pod *corev1.Pod) {
	t.Helper()
	if _, err := c.Client.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func mustNamespace(t *testing.T, c *cluster.Cluster, name string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := c.Client.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// auditEvents reads the apiserver audit log.
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
		Code int `json:"code"`
	} `json:"responseStatus"`
	StageTimestamp time.Time `json:"stageTimestamp"`
}

func auditEvents(t *testing.T, path string) []auditEvent {
	t.Helper()
	f, err := os.Open(path)
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
			t.Fatalf("audit log: %v", err)
		}
		out = append(out, e)
	}
	return out
}

const nodeWritesAuditPolicy = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
- level: Metadata
  resources:
  - group: ""
    resources: ["nodes", "nodes/status"]
  verbs: ["patch", "update"]
- level: None
`
