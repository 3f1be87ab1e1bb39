package extender

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/kube-reclaim/kube-reclaim/enforcement"
	"github.com/kube-reclaim/kube-reclaim/internal/serving"
	"github.com/kube-reclaim/kube-reclaim/test/cputime"
)

// Environment of the peer process of BenchmarkReclaimedPodLoopback.
const (
	peerExtenderURL = "KUBE_RECLAIM_LOOPBACK_EXTENDER"
	peerPods        = "KUBE_RECLAIM_LOOPBACK_PODS"
)

// Shape of the loopback run: the rate and Binding latency of `bench
// scheduler` on this kind of machine, so that binds overlap and most of
// them dial a new connection, as kube-scheduler's do there (it keeps two
// idle connections per extender).
const (
	loopbackRate       = 100 // pods a second
	loopbackBindDelay  = 150 * time.Millisecond
	loopbackNamesSent  = 100
	loopbackNodesCache = 1000
)

// BenchmarkReclaimedPodLoopback is what one reclaimed pod costs the extender
// process as `bench scheduler` drives it (docs/design.md, P2), without the
// cluster: a peer process plays kube-scheduler (one /filter per pod with the
// Pod and 100 node names, then an overlapping /bind, over HTTP on loopback)
// and the API server (the Binding, over HTTP/2 and TLS, answered after a
// delay). The extender's handler, its HTTP server and its API client run
// in this process, and extender-cpu-us/pod is this process's CPU time (user
// and system) per pod: the figure the bench's CPU table reports.
func BenchmarkReclaimedPodLoopback(b *testing.B) {
	s, _ := benchCluster(b, loopbackNodesCache)
	s.requireEnforced = true
	// The pod informer holds every pod the scheduler filters, as on a
	// cluster, where both read the same API server.
	store := s.pods.(mapPods)
	for i := range b.N {
		p := loopbackPod(b, i)
		store[p.Namespace+"/"+p.Name] = newPodRecord(testNames, p)
	}
	// The verbs' server as Run serves them.
	ln, err := listenVerbs(context.Background(), "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	srv := serving.NewServer("", s.handler())
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()
	cmd := exec.Command(os.Args[0], "-test.run=^TestLoopbackPeer$")
	cmd.Env = append(os.Environ(), peerExtenderURL+"=http://"+ln.Addr().String(), peerPods+"="+strconv.Itoa(b.N))
	cmd.Stderr = os.Stderr
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = cmd.Wait() }()
	out := bufio.NewScanner(stdout)
	apiURL := peerLine(b, out, "API ")
	client, err := kubernetes.NewForConfig(&rest.Config{Host: apiURL, QPS: 1e6, Burst: 1e6,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		ContentConfig: rest.ContentConfig{ContentType: "application/vnd.kubernetes.protobuf",
			AcceptContentTypes: "application/vnd.kubernetes.protobuf,application/json"}})
	if err != nil {
		b.Fatal(err)
	}
	s.client = client
	// The informer's confirmations return the room of bound pods.
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(100 * time.Millisecond):
				s.cache.Expire(t0.Add(24 * time.Hour))
			}
		}
	}()
	b.ResetTimer()
	cpu0, _ := cputime.Process()
	if _, err := io.WriteString(stdin, "go\n"); err != nil {
		b.Fatal(err)
	}
	if res := peerLine(b, out, "done "); res != "0" {
		b.Fatalf("%s pods failed", res)
	}
	cpu1, _ := cputime.Process()
	b.StopTimer()
	b.ReportMetric(float64((cpu1-cpu0).Microseconds())/float64(b.N), "extender-cpu-us/pod")
}

func peerLine(b *testing.B, sc *bufio.Scanner, prefix string) string {
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), prefix); ok {
			return v
		}
	}
	b.Fatalf("peer ended before %q: %v", prefix, sc.Err())
	return ""
}

// loopbackPod is the i-th pod of a loopback run, as the pod webhook leaves
// it: both processes make the same.
func loopbackPod(tb testing.TB, i int) *corev1.Pod {
	p := realisticPod()
	if _, err := enforcement.Enforce(&p.Spec, testNames); err != nil {
		tb.Fatal(err)
	}
	p.Name = fmt.Sprintf("%s-%06d", p.Name, i)
	p.UID = types.UID(fmt.Sprintf("6f1c2d9e-3b4a-4c5d-8e7f-%012d", i))
	return p
}

// TestLoopbackPeer is the peer process of BenchmarkReclaimedPodLoopback.
func TestLoopbackPeer(t *testing.T) {
	extURL := os.Getenv(peerExtenderURL)
	if extURL == "" {
		t.Skip("the peer process of BenchmarkReclaimedPodLoopback")
	}
	pods, _ := strconv.Atoi(os.Getenv(peerPods))
	api := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		time.Sleep(loopbackBindDelay)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Success","code":201}`)
	}))
	api.EnableHTTP2 = true
	api.StartTLS()
	defer api.Close()
	fmt.Println("API " + api.URL)
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	names := make([]string, loopbackNamesSent)
	for i := range names {
		names[i] = fmt.Sprintf("worker-pool-a-%05d.cluster.example.com", i*(loopbackNodesCache/loopbackNamesSent))
	}
	// kube-scheduler's extender client: one transport, Go's defaults.
	client := &http.Client{Transport: &http.Transport{}, Timeout: 5 * time.Second}
	post := func(path string, v, out any) error {
		body, err := json.Marshal(v)
		if err != nil {
			return err
		}
		resp, err := client.Post(extURL+path, "application/json", bytes.NewReader(body))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			msg, _ := io.ReadAll(resp.Body)
			return fmt.Errorf("%s: %d %s", path, resp.StatusCode, msg)
		}
		return json.NewDecoder(resp.Body).Decode(out)
	}
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		failed int
	)
	fail := func(err error) {
		mu.Lock()
		defer mu.Unlock()
		if failed == 0 {
			fmt.Fprintln(os.Stderr, err)
		}
		failed++
	}
	tick := time.NewTicker(time.Second / loopbackRate)
	defer tick.Stop()
	for i := range pods {
		<-tick.C
		p := loopbackPod(t, i)
		var fr extenderv1.ExtenderFilterResult
		if err := post("/filter", &extenderv1.ExtenderArgs{Pod: p, NodeNames: &names}, &fr); err != nil {
			fail(err)
			continue
		}
		if fr.NodeNames == nil || len(*fr.NodeNames) == 0 {
			fail(fmt.Errorf("filter passed no node: %+v", fr))
			continue
		}
		// kube-scheduler binds in a goroutine of its own and goes on.
		wg.Add(1)
		go func(node string) {
			defer wg.Done()
			var br extenderv1.ExtenderBindingResult
			if err := post("/bind", &extenderv1.ExtenderBindingArgs{PodName: p.Name, PodNamespace: p.Namespace, PodUID: p.UID, Node: node}, &br); err != nil {
				fail(err)
			} else if br.Error != "" {
				fail(fmt.Errorf("bind: %s", br.Error))
			}
		}((*fr.NodeNames)[0])
	}
	wg.Wait()
	fmt.Printf("done %d\n", failed)
}
