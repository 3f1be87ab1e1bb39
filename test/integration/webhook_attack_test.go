package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
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
