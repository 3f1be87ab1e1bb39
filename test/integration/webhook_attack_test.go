package integration

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/procfs"
	"golang.org/x/sync/errgroup"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
	"github.com/kube-reclaim/kube-reclaim/webhook"
)

// Forged reviews, as anyone who can reach the webhook's Service can send.
const (
	forgedReviews     = 300
	forgedValueBytes  = 1 << 20
	forgedConcurrency = 16
	// maxWebhookGrowth is the growth of the webhook's RSS the attack may
	// cause (issue 28's goal).
	maxWebhookGrowth = 64 << 20
	// rssCounterSlack is how far a VmRSS reading may run ahead of VmHWM:
	// the kernel folds each thread's count in lazily, up to 64 pages (256 KiB)
	// behind, and the webhook runs a dozen or so threads.
	rssCounterSlack = 4 << 20
)

// TestWebhookAttack runs the real webhook role against the real apiserver
// and attacks it as issue 28 did: forged node reviews posted straight to its
// HTTPS port must not grow it without bound, and an in-place resize through
// the apiserver must not take a reclaimed pod past its grant. Each has a
// positive control: a real node's status write is still mutated, and a
// resize within the grant is stored.
func TestWebhookAttack(t *testing.T) {
	ctx := context.Background()
	c := cluster.StartForTest(t, cluster.Options{HeartbeatInterval: 4 * time.Second, NoMetricsServer: true, NoScheduler: true})
	nodes := framework.AddReadyNodes(t, c, 1, cluster.NodeSpec{NamePrefix: "atk", CPU: resource.MustParse("16"), Memory: resource.MustParse("64Gi")}, time.Minute)
	wh := registerWebhook(t, c, "--stale-after=1m", "--publisher-lease-name=", "--oversell=true")
	port := wh.Port
	heartbeat := 30 * time.Second // 4s + jitter, with room for a busy machine
	wh.waitNodeReview(t, 2*heartbeat)
	// realNodeMutated is the positive control: an annotation with new
	// values, then the node's next status write through the apiserver
	// carries them.
	realNodeMutated := func(t *testing.T, cpu, mem int64) {
		t.Helper()
		framework.SetAnnotation(t, c, nodes[0], reclaimable.Annotation{CPUMilli: cpu, MemoryBytes: mem, Policy: "usage", WriteTime: time.Now()})
		assertInjected(t, waitHeartbeat(t, c, nodes[0], heartbeat), cpu, mem)
	}

	t.Run("300 forged 1 MiB node reviews with distinct names grow the webhook by less than 64 MiB", func(t *testing.T) {
		realNodeMutated(t, 3000, 2<<30)
		pid := c.Process("webhook").PID()
		if pid == 0 {
			t.Fatal("webhook process not running")
		}
		before := rss(t, pid)
		reviewsBefore := wh.Metric(t, "kube_reclaim_webhook_review_duration_seconds_count")

		stop := make(chan struct{})
		var samples []int64
		var sampler sync.WaitGroup
		sampler.Add(1)
		go func() {
			defer sampler.Done()
			tick := time.NewTicker(20 * time.Millisecond)
			defer tick.Stop()
			for {
				samples = append(samples, rss(t, pid))
				select {
				case <-stop:
					return
				case <-tick.C:
				}
			}
		}()
		client := webhookClient(c)
		url := fmt.Sprintf("https://127.0.0.1:%d%s?timeout=2s", port, webhook.Path)
		var g errgroup.Group
		g.SetLimit(forgedConcurrency)
		var mu sync.Mutex
		answers := map[string]int{}
		for i := range forgedReviews {
			g.Go(func() error {
				body := forgedNodeReview(t, i)
				res, err := client.Post(url, "application/json", bytes.NewReader(body))
				if err != nil {
					return err
				}
				defer res.Body.Close()
				b, err := io.ReadAll(res.Body)
				if err != nil {
					return err
				}
				var out admissionv1.AdmissionReview
				if res.StatusCode != http.StatusOK || json.Unmarshal(b, &out) != nil || out.Response == nil {
					return fmt.Errorf("forged review %d: HTTP %d: %.200s", i, res.StatusCode, b)
				}
				if !out.Response.Allowed || string(out.Response.UID) != fmt.Sprintf("forged-%d", i) {
					return fmt.Errorf("forged review %d answered %+v: the node path must allow every review, with its own UID", i, out.Response)
				}
				mu.Lock()
				answers[fmt.Sprintf("patched=%v", out.Response.Patch != nil)]++
				mu.Unlock()
				return nil
			})
		}
		attackErr := g.Wait()
		// Keep sampling a moment: what the attack left behind counts too.
		time.Sleep(2 * time.Second)
		close(stop)
		sampler.Wait()
		if attackErr != nil {
			t.Fatal(attackErr)
		}
		peak := before
		for _, s := range samples {
			peak = max(peak, s)
		}
		hwm := peakRSS(t, pid)
		t.Logf("webhook RSS before %d MiB, peak sampled %d MiB over %d samples, VmHWM %d MiB; answers %v",
			before>>20, peak>>20, len(samples), hwm>>20, answers)
		if len(samples) < 10 {
			t.Fatalf("only %d RSS samples during the attack", len(samples))
		}
		// The kernel counts RSS per thread and folds the counts in lazily,
		// so a VmRSS reading can run a few dozen pages ahead of VmHWM; more
		// than that would mean the sampler read another process.
		if hwm+rssCounterSlack < peak {
			t.Errorf("sampler inconsistent: sampled %d bytes above the kernel's high-water mark %d", peak, hwm)
		}
		// The high-water mark also sees peaks between two samples.
		if growth := max(peak, hwm) - before; growth >= maxWebhookGrowth {
			t.Errorf("webhook RSS grew by %d MiB (before %d MiB, peak %d MiB), want < %d MiB",
				growth>>20, before>>20, max(peak, hwm)>>20, maxWebhookGrowth>>20)
		}
		// The forged reviews reached the mutator rather than being turned
		// away before it.
		if got := wh.Metric(t, "kube_reclaim_webhook_review_duration_seconds_count") - reviewsBefore; got < forgedReviews {
			t.Errorf("webhook counted %v reviews during the attack, want at least %d", got, forgedReviews)
		}
		t.Logf("in-flight waits: served %v, timed out %v",
			wh.Metric(t, "kube_reclaim_webhook_in_flight_waits_total", "route", "nodes", "result", "served"),
			wh.Metric(t, "kube_reclaim_webhook_in_flight_waits_total", "route", "nodes", "result", "timed-out"))
		// Positive control after the attack: the webhook still mutates a
		// real node's status write.
		realNodeMutated(t, 4000, 3<<30)
	})

	// podEnforced creates a reclaimed pod through the apiserver and checks
	// the pod webhook gave it native limits equal to its grant (its patch),
	// within the time the pod webhook is given; it is deleted afterwards.
	const attackNS = "attack"
	framework.CreateNamespace(t, c, attackNS)
	waitDefaultServiceAccount(t, c, attackNS)
	attackPods := c.Client.CoreV1().Pods(attackNS)
	podEnforced := func(t *testing.T, name string) {
		t.Helper()
		start := time.Now()
		p, err := attackPods.Create(ctx, framework.ReclaimedPod(attackNS, name, 2000, 4<<30), metav1.CreateOptions{})
		took := time.Since(start)
		if err != nil {
			t.Fatalf("creating reclaimed pod %s (after %s): %v", name, took, err)
		}
		defer func() { _ = attackPods.Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)}) }()
		lim := p.Spec.Containers[0].Resources.Limits
		if lim.Cpu().Cmp(resource.MustParse("2")) != 0 || lim.Memory().Cmp(resource.MustParse("4Gi")) != 0 {
			t.Fatalf("reclaimed pod %s stored with limits cpu %s memory %s, want 2 and 4Gi (the webhook's patch)", name, lim.Cpu(), lim.Memory())
		}
		t.Logf("reclaimed pod %s created and enforced in %s", name, took)
	}
	// The apiserver loads the pod webhook's configuration through an
	// informer: wait until a reclaimed pod is enforced.
	if _, ok := framework.Poll(30*time.Second, 500*time.Millisecond, func() bool {
		p, err := attackPods.Create(ctx, framework.ReclaimedPod(attackNS, "warm-up", 2000, 4<<30), metav1.CreateOptions{})
		if err != nil {
			return false
		}
		_ = attackPods.Delete(ctx, p.Name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
		_, enforced := p.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU]
		return enforced
	}); !ok {
		t.Fatal("the pod webhook never enforced a reclaimed pod")
	}

	t.Run("S6: a forged 3 MiB pod review of a million empty containers leaves the webhook under 200 MiB, answering, and real pods enforced", func(t *testing.T) {
		podEnforced(t, "before-million")
		pid := c.Process("webhook").PID()
		if pid == 0 {
			t.Fatal("webhook process not running")
		}
		body := millionContainersReview()
		if int64(len(body)) > webhook.DefaultMaxRequestBytes {
			t.Fatalf("the forged review is %d bytes, above the webhook's body limit: it would not reach the decoder", len(body))
		}
		before := rss(t, pid)
		tooManyBefore := wh.Metric(t, "kube_reclaim_webhook_errors_total", "kind", webhook.ErrTooManyItems)
		stop, samples := sampleRSS(t, pid)
		client := webhookClient(c)
		url := fmt.Sprintf("https://127.0.0.1:%d%s?timeout=5s", port, webhook.PodPath)
		send := func(i int) (*admissionv1.AdmissionResponse, error) {
			res, err := client.Post(url, "application/json", bytes.NewReader(body))
			if err != nil {
				return nil, err
			}
			defer res.Body.Close()
			b, err := io.ReadAll(res.Body)
			if err != nil {
				return nil, err
			}
			var out admissionv1.AdmissionReview
			if res.StatusCode != http.StatusOK || json.Unmarshal(b, &out) != nil || out.Response == nil || out.Response.UID != "million" {
				return nil, fmt.Errorf("forged review %d: HTTP %d: %.300s", i, res.StatusCode, b)
			}
			return out.Response, nil
		}
		// One, then eight at once (more than the in-flight slots).
		resp, err := send(0)
		if err != nil {
			stop()
			t.Fatal(err)
		}
		if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusUnprocessableEntity ||
			!strings.Contains(resp.Result.Message, `"containers" has more than 256 items`) {
			t.Errorf("forged review answered %+v, want a 422 refusal naming the containers bound", resp)
		}
		var g errgroup.Group
		var mu sync.Mutex
		codes := map[int32]int{}
		for i := range 8 {
			g.Go(func() error {
				resp, err := send(i + 1)
				if err != nil {
					return err
				}
				if resp.Allowed || resp.Result == nil {
					return fmt.Errorf("forged review %d allowed: %+v", i+1, resp)
				}
				mu.Lock()
				codes[resp.Result.Code]++
				mu.Unlock()
				return nil
			})
		}
		attackErr := g.Wait()
		time.Sleep(2 * time.Second) // what the attack left behind counts too
		peak := stop()
		if attackErr != nil {
			t.Fatal(attackErr)
		}
		hwm := peakRSS(t, pid)
		t.Logf("webhook RSS before %d MiB, peak sampled %d MiB over %d samples, VmHWM %d MiB; answers to the eight: %v",
			before>>20, peak>>20, samples(), hwm>>20, codes)
		for code := range codes {
			if code != http.StatusUnprocessableEntity && code != http.StatusTooManyRequests {
				t.Errorf("answers %v: want only 422 (bound) or 429 (busy)", codes)
			}
		}
		if hwm+rssCounterSlack < peak {
			t.Errorf("sampler inconsistent: sampled %d bytes above the kernel's high-water mark %d", peak, hwm)
		}
		if got := max(peak, hwm); got >= maxPodReviewRSS {
			t.Errorf("webhook peak RSS %d MiB, want < %d MiB", got>>20, maxPodReviewRSS>>20)
		}
		// The reviews reached the decoder rather than being turned away
		// before it.
		if got := wh.Metric(t, "kube_reclaim_webhook_errors_total", "kind", webhook.ErrTooManyItems) - tooManyBefore; got < 1 {
			t.Errorf("errors_total{kind=too-many-items} grew by %v, want at least 1", got)
		}
		podEnforced(t, "after-million")
	})

	t.Run("S7: eight connections holding ?timeout=876000h without a body: real node and pod reviews are answered in time with their patches", func(t *testing.T) {
		const holders = 8
		readBodyBefore := wh.Metric(t, "kube_reclaim_webhook_errors_total", "kind", webhook.ErrReadBody)
		h := holdConnections(t, c, port, holders)
		for i, want := range []int64{5000, 6000, 7000} {
			h.waitOpen(t, holders)
			framework.SetAnnotation(t, c, nodes[0], reclaimable.Annotation{CPUMilli: want, MemoryBytes: want << 20, Policy: "usage", WriteTime: time.Now()})
			h.waitOpen(t, holders)
			// A real status write through the apiserver removing the
			// reclaimed values: the webhook puts the annotated ones back in
			// the same write, which the apiserver waits for at most 2 s.
			gone := map[string]any{string(names.CPU): nil, string(names.Memory): nil}
			start := time.Now()
			n := framework.MustPatchNode(t, c, nodes[0], map[string]any{"status": map[string]any{"capacity": gone, "allocatable": gone}}, "status")
			took := time.Since(start)
			t.Logf("status write %d answered in %s with %d holders open", i, took, h.open())
			assertInjected(t, n, want, want<<20)
			if took >= 2*time.Second {
				t.Errorf("status write %d took %s, want under the node webhook's 2 s", i, took)
			}
		}
		h.waitOpen(t, holders)
		podEnforced(t, "beside-holders")
		cycles, lifetimes := h.stop(t)
		t.Logf("%d held connections, each held %s to %s", cycles, lifetimes[0], lifetimes[len(lifetimes)-1])
		// Control: the connections reached the handler and were held there
		// until the webhook's read deadline answered them, overlapping the
		// writes above.
		if got := wh.Metric(t, "kube_reclaim_webhook_errors_total", "kind", webhook.ErrReadBody) - readBodyBefore; got < float64(cycles) {
			t.Errorf("errors_total{kind=read-body} grew by %v, want at least the %d held connections", got, cycles)
		}
		if lifetimes[0] < time.Second {
			t.Errorf("a held connection was answered after %s, before the pod route's read deadline", lifetimes[0])
		}
	})

	t.Run("a resize beyond the grant is refused by the apiserver and one within it is stored", func(t *testing.T) {
		const ns = "resize"
		framework.CreateNamespace(t, c, ns)
		waitDefaultServiceAccount(t, c, ns)
		pods := c.Client.CoreV1().Pods(ns)
		var pod *corev1.Pod
		if _, ok := framework.Poll(30*time.Second, 500*time.Millisecond, func() bool {
			_ = pods.Delete(ctx, "batch", metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
			p, err := pods.Create(ctx, framework.ReclaimedPod(ns, "batch", 2000, 4<<30), metav1.CreateOptions{})
			if err != nil {
				return false
			}
			pod = p
			_, enforced := p.Spec.Containers[0].Resources.Limits[corev1.ResourceCPU]
			return enforced
		}); !ok {
			t.Fatal("the pod webhook never enforced a reclaimed pod")
		}
		limits := func(p *corev1.Pod) string {
			r := p.Spec.Containers[0].Resources
			return fmt.Sprintf("requests cpu %s memory %s, limits cpu %s memory %s",
				r.Requests.Cpu(), r.Requests.Memory(), r.Limits.Cpu(), r.Limits.Memory())
		}
		t.Logf("stored: %s", limits(pod))
		resize := func(cpuReq, cpuLim string) (*corev1.Pod, error) {
			p := pod.DeepCopy()
			r := &p.Spec.Containers[0].Resources
			r.Requests[corev1.ResourceCPU] = resource.MustParse(cpuReq)
			r.Limits[corev1.ResourceCPU] = resource.MustParse(cpuLim)
			return pods.UpdateResize(ctx, p.Name, p, metav1.UpdateOptions{})
		}

		// Beyond: the cpu limit raised to 4 with the grant at 2.
		_, err := resize("0", "4")
		if err == nil || !strings.Contains(err.Error(), "refuses this resize") || !strings.Contains(err.Error(), "not within its grant") {
			t.Fatalf("resize to a cpu limit of 4 (grant 2): %v, want the webhook's refusal", err)
		}
		t.Logf("refused: %v", err)
		if got, err := pods.Get(ctx, "batch", metav1.GetOptions{}); err != nil || got.Spec.Containers[0].Resources.Limits.Cpu().Cmp(resource.MustParse("2")) != 0 {
			t.Fatalf("after the refused resize: %v, %s", err, limits(got))
		}
		// Within (positive control): native request and limit raised
		// together keep the limit equal to the grant.
		got, err := resize("500m", "2500m")
		if err != nil {
			t.Fatalf("resize within the grant refused: %v", err)
		}
		if got.Spec.Containers[0].Resources.Limits.Cpu().Cmp(resource.MustParse("2500m")) != 0 {
			t.Errorf("stored after the resize: %s, want a cpu limit of 2500m", limits(got))
		}
		t.Logf("resized within the grant: %s", limits(got))
	})
}

// maxPodReviewRSS is the webhook's peak RSS the forged pod review may
// cause (goal S6 of issue 39).
const maxPodReviewRSS = 200 << 20

// millionContainersReview is a pod review whose pod has a million empty
// containers, three bytes each: about 3 MB.
func millionContainersReview() []byte {
	var b bytes.Buffer
	b.WriteString(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"million",` +
		`"kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},` +
		`"name":"p","namespace":"attack","operation":"CREATE","object":{"apiVersion":"v1","kind":"Pod",` +
		`"metadata":{"name":"p","namespace":"attack"},"spec":{"containers":[`)
	b.WriteString(strings.Repeat("{},", 1_000_000-1))
	b.WriteString("{}]}}}}")
	return b.Bytes()
}

// sampleRSS samples pid's VmRSS every 20 ms until stop, which returns the
// highest sample; samples counts them.
func sampleRSS(t *testing.T, pid int) (stop func() int64, samples func() int) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	var peak int64
	var n int
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			peak, n = max(peak, rss(t, pid)), n+1
			select {
			case <-done:
				return
			case <-tick.C:
			}
		}
	}()
	return func() int64 {
			close(done)
			wg.Wait()
			return peak
		}, func() int {
			return n
		}
}

// heldConnections are TLS connections to the webhook that each send the
// headers of a pod review announcing a body, with the caller's own timeout
// of 100 years, and then nothing; each is reopened as soon as the webhook
// answers it.
type heldConnections struct {
	mu        sync.Mutex
	opened    int
	lifetimes []time.Duration
	errs      []error
	done      chan struct{}
	wg        sync.WaitGroup
}

func holdConnections(t *testing.T, c *cluster.Cluster, port, n int) *heldConnections {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.CA().CertPEM)
	h := &heldConnections{done: make(chan struct{})}
	head := fmt.Sprintf("POST %s?timeout=876000h HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n", webhook.PodPath, port)
	hold := func() error {
		conn, err := tls.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port), &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12})
		if err != nil {
			return err
		}
		defer conn.Close()
		if _, err := io.WriteString(conn, head); err != nil {
			return err
		}
		start := time.Now()
		h.mu.Lock()
		h.opened++
		h.mu.Unlock()
		defer func() {
			h.mu.Lock()
			h.opened--
			h.mu.Unlock()
		}()
		_ = conn.SetReadDeadline(time.Now().Add(time.Minute))
		res, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			return fmt.Errorf("held connection: %w", err)
		}
		_ = res.Body.Close()
		if res.StatusCode != http.StatusBadRequest {
			return fmt.Errorf("held connection answered %s, want 400 (no body by the read deadline)", res.Status)
		}
		h.mu.Lock()
		h.lifetimes = append(h.lifetimes, time.Since(start))
		h.mu.Unlock()
		return nil
	}
	for range n {
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			for {
				select {
				case <-h.done:
					return
				default:
				}
				if err := hold(); err != nil {
					h.mu.Lock()
					h.errs = append(h.errs, err)
					h.mu.Unlock()
					return
				}
			}
		}()
	}
	return h
}

func (h *heldConnections) open() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.opened
}

// waitOpen waits until n connections are held.
func (h *heldConnections) waitOpen(t *testing.T, n int) {
	t.Helper()
	if _, ok := framework.Poll(10*time.Second, 5*time.Millisecond, func() bool { return h.open() >= n }); !ok {
		h.mu.Lock()
		defer h.mu.Unlock()
		t.Fatalf("only %d of %d connections held; errors: %v", h.opened, n, h.errs)
	}
}

// stop lets every held connection be answered, then returns how many were
// answered and their lifetimes, shortest first.
func (h *heldConnections) stop(t *testing.T) (int, []time.Duration) {
	t.Helper()
	close(h.done)
	h.wg.Wait()
	if len(h.errs) > 0 {
		t.Fatalf("held connections: %v", h.errs)
	}
	slices.Sort(h.lifetimes)
	if len(h.lifetimes) == 0 {
		t.Fatal("no held connection was answered")
	}
	return len(h.lifetimes), h.lifetimes
}

// forgedNodeReview is an AdmissionReview of a status write of node
// forged-<i> carrying a 1 MiB reclaimable annotation (valid JSON with a huge
// explanation on even i, junk on odd i) and a 1 MiB invalid oversell ratio:
// what the webhook once cached per node name.
func forgedNodeReview(t *testing.T, i int) []byte {
	name := fmt.Sprintf("forged-%d", i)
	pad := strings.Repeat(string(rune('a'+i%26)), forgedValueBytes)
	value := `{"cpu":1,"memory":1,"policy":"usage","writeTime":"` + time.Now().UTC().Format(time.RFC3339) +
		`","explanation":{"cpu":{"terms":[{"name":"x","value":1,"note":"` + pad + `"}],"result":1},"memory":{"terms":[],"result":1}}}`
	if i%2 == 1 {
		value = pad
	}
	node := corev1.Node{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Node"},
		ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels:      map[string]string{names.CPURatio: pad[:forgedValueBytes/8]},
			Annotations: map[string]string{names.Annotation: value}},
		Status: corev1.NodeStatus{
			Capacity:    corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi")},
			Allocatable: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("16Gi")},
		},
	}
	raw, err := json.Marshal(&node)
	if err != nil {
		t.Error(err)
		return nil
	}
	b, err := json.Marshal(admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:  types.UID(name),
			Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Node"}, Resource: metav1.GroupVersionResource{Version: "v1", Resource: "nodes"},
			SubResource: "status", Name: name, Operation: admissionv1.Update,
			Object: runtime.RawExtension{Raw: raw},
		},
	})
	if err != nil {
		t.Error(err)
	}
	return b
}

// webhookClient trusts the cluster CA, which signed the webhook's serving
// certificate, as the apiserver does through the configuration's caBundle.
func webhookClient(c *cluster.Cluster) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(c.CA().CertPEM)
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, MaxIdleConnsPerHost: forgedConcurrency}}
}

// rss is the process's resident set (VmRSS) in bytes.
func rss(t *testing.T, pid int) int64 {
	s := procStatus(t, pid)
	return int64(s.VmRSS)
}

// peakRSS is the process's high-water mark of its resident set (VmHWM).
func peakRSS(t *testing.T, pid int) int64 {
	return int64(procStatus(t, pid).VmHWM)
}

func procStatus(t *testing.T, pid int) procfs.ProcStatus {
	p, err := procfs.NewProc(pid)
	if err != nil {
		t.Error(err)
		return procfs.ProcStatus{}
	}
	s, err := p.NewStatus()
	if err != nil {
		t.Error(err)
	}
	return s
}
