package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/kube-reclaim/kube-reclaim/extender"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
)

// TestExtenderAttacks plays an attacker who can reach the extender's verbs
// against the real API server, the real kube-scheduler and the extender
// process (issues 28 and 39): forged binds place nothing, forged filters
// neither stand in for the pod the API server holds nor replace the
// scheduler's verdict, and huge bodies (a million unknown node names, 8 MiB
// of Nodes items or of containers) neither kill the extender nor grow it,
// while the real scheduler keeps placing reclaimed pods through the same
// extender.
func TestExtenderAttacks(t *testing.T) {
	ctx := context.Background()
	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	url := fmt.Sprintf("http://127.0.0.1:%d", port)
	c := cluster.StartForTest(t, cluster.Options{NoMetricsServer: true, SchedulerConfig: schedulerConfigFor(t, url)})
	// The defaults: --scheduler-name kube-reclaim-scheduler.
	ext := framework.StartRole(t, c, "extender", "extender", fmt.Sprintf("--listen-address=127.0.0.1:%d", port), "--publisher-lease-name=")
	const gib = int64(1 << 30)
	nodes := framework.AddReadyNodes(t, c, 2, cluster.NodeSpec{NamePrefix: "attack", Labels: map[string]string{"group": "attack"}}, time.Minute)
	for _, n := range nodes {
		framework.SetAnnotation(t, c, n, reclaimable.Annotation{CPUMilli: 8000, MemoryBytes: 8 * gib, Policy: "usage", WriteTime: time.Now()})
		framework.SetReclaimedStatus(t, c, n, 8000, 8*gib)
	}
	if _, ok := framework.Poll(30*time.Second, 200*time.Millisecond, func() bool {
		return ext.Metric(t, "kube_reclaim_extender_cached_nodes") >= 2
	}); !ok {
		t.Fatal("the extender never cached the two nodes")
	}
	framework.CreateNamespace(t, c, "attack")
	post := func(verb string, v any) (int, []byte) {
		t.Helper()
		var body []byte
		switch b := v.(type) {
		case []byte:
			body = b
		default:
			if body, err = json.Marshal(v); err != nil {
				t.Fatal(err)
			}
		}
		resp, err := http.Post(url+"/"+verb, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("POST /%s: %v", verb, err)
		}
		return resp.StatusCode, []byte(readAll(resp))
	}
	stored := func(name string) *corev1.Pod {
		t.Helper()
		p, err := c.Client.CoreV1().Pods("attack").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}

	t.Run("forged binds place nothing, while the scheduler binds through the same extender", func(t *testing.T) {
		// No profile serves "nobody-scheduler": nothing but a forged bind
		// could place its pods. The kube-reclaim-scheduler pods select no
		// node, so kube-scheduler never filters them through the extender.
		const otherSched = "nobody-scheduler"
		victim := framework.RegularPod("attack", "victim", "", "10m", "16Mi")
		victim.Spec.SchedulerName = otherSched
		foreign := reclaimedPod("attack", "foreign-reclaimed", "attack", 1000, gib)
		foreign.Spec.SchedulerName = otherSched
		unfiltered := reclaimedPod("attack", "never-filtered", "no-such-group", 1000, gib)
		unfiltered.Spec.SchedulerName = extender.SchedulerName
		plain := framework.RegularPod("attack", "plain-managed", "", "10m", "16Mi")
		plain.Spec.SchedulerName = extender.SchedulerName
		plain.Spec.NodeSelector = map[string]string{"group": "no-such-group"}
		for _, p := range []*corev1.Pod{victim, foreign, unfiltered, plain} {
			framework.CreatePod(t, c, p)
		}
		// A forged filter call first makes the extender judge a pod (as a
		// caller on 127.0.0.1 could); mutate changes what it claims.
		forgeFilter := func(name string, mutate func(*corev1.Pod)) {
			p := stored(name)
			if mutate != nil {
				mutate(p)
			}
			code, body := post("filter", extenderv1.ExtenderArgs{Pod: p, NodeNames: &[]string{nodes[0]}})
			if code != http.StatusOK {
				t.Fatalf("forged filter of %s: %d %s", name, code, body)
			}
		}
		// claimReclaimed makes a forged pod ask reclaimed resources, name
		// this extender's scheduler when scheduler is set, and claim another
		// resourceVersion than the stored one when otherVersion is set.
		claimReclaimed := func(scheduler, otherVersion bool) func(*corev1.Pod) {
			return func(p *corev1.Pod) {
				p.Spec.Containers = reclaimedPod("attack", p.Name, "attack", 1000, gib).Spec.Containers
				if scheduler {
					p.Spec.SchedulerName = extender.SchedulerName
				}
				if otherVersion {
					p.ResourceVersion += "0"
				}
			}
		}
		attacks := []struct {
			name, pod string
			forge     func()
			uid       func() string
			reason    string // bind_refusals_total reason
			// notRecorded: the forged filter's verdict is not kept.
			notRecorded bool
		}{
			{name: "a pending pod of another scheduler asking nothing reclaimed", pod: "victim", reason: "not-filtered"},
			{name: "a pod of another scheduler asking reclaimed resources", pod: "foreign-reclaimed", reason: "not-filtered"},
			{name: "a reclaimed pod of the right scheduler on a node its filter never passed", pod: "never-filtered", reason: "not-filtered"},
			{name: "a pod of another scheduler after a forged filter of it", pod: "foreign-reclaimed", reason: "other-scheduler",
				forge: func() { forgeFilter("foreign-reclaimed", nil) }},
			// A forged filter naming the stored version of the pod is answered
			// for the extender's informer record of it: what it claims is
			// ignored, and the record asks nothing reclaimed, so the filter
			// records nothing for bind.
			{name: "a pod of another scheduler after a forged filter of its stored version claiming the right one and reclaimed requests", pod: "victim", reason: "not-filtered",
				forge: func() { forgeFilter("victim", claimReclaimed(true, false)) }},
			{name: "a pod of the right scheduler asking nothing reclaimed after a forged filter of its stored version claiming it does", pod: "plain-managed", reason: "not-filtered",
				forge: func() { forgeFilter("plain-managed", claimReclaimed(false, false)) }},
			// Claiming another version, the forged pod is decoded from the
			// body, but it disagrees with the pod the informer holds, so
			// its verdict is not kept for bind.
			{name: "a pod of another scheduler after a forged filter of another version claiming the right one and reclaimed requests", pod: "victim", reason: "not-filtered",
				forge: func() { forgeFilter("victim", claimReclaimed(true, true)) }, notRecorded: true},
			{name: "a pod of the right scheduler asking nothing reclaimed after a forged filter of another version claiming it does", pod: "plain-managed", reason: "not-filtered",
				forge: func() { forgeFilter("plain-managed", claimReclaimed(false, true)) }, notRecorded: true},
			// A pod the informer has never seen: its verdict is kept, but
			// bind asks the API server, which holds no such pod.
			{name: "a pod the API server does not hold after a forged filter of it", pod: "invented", reason: "pod-not-found",
				forge: func() {
					p := reclaimedPod("attack", "invented", "attack", 1000, gib)
					p.UID, p.ResourceVersion, p.Spec.SchedulerName = "invented-uid", "1", extender.SchedulerName
					if code, body := post("filter", extenderv1.ExtenderArgs{Pod: p, NodeNames: &[]string{nodes[0]}}); code != http.StatusOK {
						t.Fatalf("forged filter of an invented pod: %d %s", code, body)
					}
				}, uid: func() string { return "invented-uid" }},
			{name: "a bind naming no pod UID", pod: "never-filtered", reason: "no-pod-uid", uid: func() string { return "" }},
		}
		// bindAttack posts a forged bind and returns its answer's Error.
		bindAttack := func(pod, uid string) string {
			code, body := post("bind", extenderv1.ExtenderBindingArgs{PodName: pod, PodNamespace: "attack", PodUID: types.UID(uid), Node: nodes[0]})
			var res extenderv1.ExtenderBindingResult
			if code != http.StatusOK || json.Unmarshal(body, &res) != nil {
				t.Fatalf("bind %s: %d %s", pod, code, body)
			}
			return res.Error
		}
		for _, a := range attacks {
			before := ext.Metric(t, "kube_reclaim_extender_bind_refusals_total", "reason", a.reason)
			notRecorded := ext.Metric(t, "kube_reclaim_extender_filter_verdicts_not_recorded_total")
			if a.forge != nil {
				a.forge()
			}
			if got := ext.Metric(t, "kube_reclaim_extender_filter_verdicts_not_recorded_total"); (got == notRecorded+1) != a.notRecorded {
				t.Errorf("%s: filter_verdicts_not_recorded_total went %v -> %v, want one more: %v", a.name, notRecorded, got, a.notRecorded)
			}
			var uid string
			if a.uid != nil {
				uid = a.uid()
			} else {
				uid = string(stored(a.pod).UID)
			}
			msg := bindAttack(a.pod, uid)
			if msg == "" {
				t.Errorf("%s: the bind was not refused", a.name)
			}
			if got := ext.Metric(t, "kube_reclaim_extender_bind_refusals_total", "reason", a.reason); got != before+1 {
				t.Errorf("%s: bind_refusals_total{reason=%q} went %v -> %v, want one more (refusal: %q)", a.name, a.reason, before, got, msg)
			}
			t.Logf("%s: refused (%s): %s", a.name, a.reason, msg)
		}
		attackPods := []string{"victim", "foreign-reclaimed", "never-filtered", "plain-managed"}
		// Every 200 ms for 5 s the attacker tries again and no attacked
		// pod gets a node; the control is a reclaimed pod the real
		// kube-scheduler filters and binds through the same extender.
		r := framework.ExpectAbsence(t, framework.Absence{Window: 5 * time.Second, Every: 200 * time.Millisecond,
			ControlWithin: time.Minute,
			Control: func() error {
				p := reclaimedPod("attack", "scheduled", "attack", 1000, gib)
				p.Spec.SchedulerName = extender.SchedulerName
				_, err := c.Client.CoreV1().Pods("attack").Create(ctx, p, metav1.CreateOptions{})
				return err
			},
			Look: func(time.Duration) ([]string, bool) {
				var v []string
				for _, name := range attackPods {
					if msg := bindAttack(name, string(stored(name).UID)); msg == "" {
						v = append(v, "a forged bind of "+name+" was accepted")
					}
					if n := stored(name).Spec.NodeName; n != "" {
						v = append(v, name+" bound to "+n)
					}
				}
				p, err := c.Client.CoreV1().Pods("attack").Get(ctx, "scheduled", metav1.GetOptions{})
				return v, err == nil && p.Spec.NodeName != ""
			}})
		if got := ext.Metric(t, "kube_reclaim_extender_binds_total", "result", "success"); got != 1 {
			t.Errorf("binds_total{result=success} = %v, want 1: the scheduler's bind of the control", got)
		}
		// No Binding was even tried for a forged pod: the invented one
		// was refused before any (the API server would have refused it).
		if got := ext.Metric(t, "kube_reclaim_extender_binds_total", "result", "api-error"); got != 0 {
			t.Errorf("binds_total{result=api-error} = %v, want 0: a Binding was tried for a forged pod", got)
		}
		t.Logf("%d looks, longest gap %s; the control pod bound %.1fs into the window", r.Looks, r.MaxGap, r.ControlSeen.Seconds())
	})

	t.Run("one 8 MB filter of a million unknown names answers without them, under 200 MiB, and filtering goes on", func(t *testing.T) {
		pid := c.Process("extender").PID()
		if pid == 0 {
			t.Fatal("no extender process")
		}
		before := vmHWM(t, pid)
		p, err := json.Marshal(reclaimedPod("attack", "memory-attack", "attack", 1000, gib))
		if err != nil {
			t.Fatal(err)
		}
		const unknown = 1000000
		var b bytes.Buffer
		b.Grow(8 << 20)
		b.WriteString(`{"Pod":`)
		b.Write(p)
		b.WriteString(`,"NodeNames":[`)
		const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
		for i := range unknown {
			n := i
			var name [4]byte
			for j := range name {
				name[j] = alphabet[n%len(alphabet)]
				n /= len(alphabet)
			}
			b.WriteByte('"')
			b.Write(name[:])
			b.WriteString(`",`)
		}
		fmt.Fprintf(&b, "%q]}", nodes[0])
		t.Logf("filter body: %d bytes, %d unknown four-letter names and one known", b.Len(), unknown)
		start := time.Now()
		code, body := post("filter", b.Bytes())
		took := time.Since(start)
		var res extenderv1.ExtenderFilterResult
		if code != http.StatusOK || json.Unmarshal(body, &res) != nil {
			t.Fatalf("filter: %d %.300s", code, body)
		}
		if res.NodeNames == nil || len(*res.NodeNames) != 1 || (*res.NodeNames)[0] != nodes[0] || len(res.FailedNodes) != 0 || len(res.FailedAndUnresolvableNodes) != 0 {
			t.Errorf("filter answered %.300s, want only %s passed and no unknown name listed", body, nodes[0])
		}
		after := vmHWM(t, pid)
		t.Logf("answer %d bytes in %s; extender peak RSS %d MiB before, %d MiB after", len(body), took.Round(time.Millisecond), before>>20, after>>20)
		if after >= 200<<20 {
			t.Errorf("extender peak RSS %d MiB, want under 200 MiB", after>>20)
		}
		if got := ext.Metric(t, "kube_reclaim_extender_filtered_nodes_total", "reason", "unknown-node"); got < unknown {
			t.Errorf("filtered_nodes_total{reason=unknown-node} = %v, want at least %d", got, unknown)
		}
		// Positive control: a normal filter still judges both nodes.
		code, body = post("filter", extenderv1.ExtenderArgs{Pod: reclaimedPod("attack", "after", "attack", 1000, gib), NodeNames: &[]string{nodes[0], nodes[1]}})
		if err := json.Unmarshal(body, &res); code != http.StatusOK || err != nil || res.NodeNames == nil || len(*res.NodeNames) != 2 {
			t.Errorf("a normal filter after the attack: %d %s", code, body)
		}
		if !framework.Ready(ext.HealthPort) {
			t.Error("the extender is not ready after the attack")
		}
	})

	t.Run("a forged filter of a real pod's UID neither replaces the scheduler's verdict nor sets what bind places", func(t *testing.T) {
		// A pod of this extender's scheduler asking 6000m that selects no
		// node, so kube-scheduler never calls the extender for it: the
		// test plays the scheduler's calls, with the pod as it sends it.
		real := reclaimedPod("attack", "real", "no-such-group", 6000, 6*gib)
		real.Spec.SchedulerName = extender.SchedulerName
		framework.CreatePod(t, c, real)
		// Whether the extender's informer has the pod yet or not, a body
		// that disagrees with the verdict kept for its UID is not kept.
		genuine := stored("real")
		filter := func(p *corev1.Pod, node string) extenderv1.ExtenderFilterResult {
			t.Helper()
			code, body := post("filter", extenderv1.ExtenderArgs{Pod: p, NodeNames: &[]string{node}})
			var res extenderv1.ExtenderFilterResult
			if code != http.StatusOK || json.Unmarshal(body, &res) != nil {
				t.Fatalf("filter: %d %s", code, body)
			}
			return res
		}
		bind := func(node string) string {
			t.Helper()
			code, body := post("bind", extenderv1.ExtenderBindingArgs{PodName: "real", PodNamespace: "attack", PodUID: genuine.UID, Node: node})
			var res extenderv1.ExtenderBindingResult
			if code != http.StatusOK || json.Unmarshal(body, &res) != nil {
				t.Fatalf("bind to %s: %d %s", node, code, body)
			}
			return res.Error
		}
		if res := filter(genuine, nodes[0]); len(*res.NodeNames) != 1 {
			t.Fatalf("the scheduler's filter passed %v, want %s", *res.NodeNames, nodes[0])
		}
		// The forgery: the pod's UID, another version claiming 1000m, on
		// the other node.
		forged := genuine.DeepCopy()
		forged.ResourceVersion += "0"
		forged.Spec.Containers = reclaimedPod("attack", "real", "attack", 1000, gib).Spec.Containers
		notRecorded := ext.Metric(t, "kube_reclaim_extender_filter_verdicts_not_recorded_total")
		filter(forged, nodes[1])
		if got := ext.Metric(t, "kube_reclaim_extender_filter_verdicts_not_recorded_total"); got != notRecorded+1 {
			t.Errorf("filter_verdicts_not_recorded_total went %v -> %v, want one more", notRecorded, got)
		}
		if msg := bind(nodes[1]); !strings.Contains(msg, "was not passed by this extender's filter") {
			t.Errorf("bind to the forged filter's node: %q, want it refused", msg)
		}
		// The scheduler's verdict stands: its bind goes through, for the
		// pod the API server holds.
		if msg := bind(nodes[0]); msg != "" {
			t.Fatalf("the scheduler's bind after the forgery: %q", msg)
		}
		if n := stored("real").Spec.NodeName; n != nodes[0] {
			t.Errorf("real is bound to %q, want %s", n, nodes[0])
		}
	})

	t.Run("S9: 8 MiB of Nodes items or of containers are refused at once, under 200 MiB, and the scheduler still places through the extender", func(t *testing.T) {
		pid := c.Process("extender").PID()
		if pid == 0 {
			t.Fatal("no extender process")
		}
		const size = 8<<20 - 64 // within the extender's 8 MiB bound, so the decoder meets it
		body := func(head, item, tail string) []byte {
			var b bytes.Buffer
			b.Grow(size)
			b.WriteString(head)
			for b.Len() < size-len(item)-len(tail) {
				b.WriteString(item)
				b.WriteByte(',')
			}
			b.WriteString(item)
			b.WriteString(tail)
			return b.Bytes()
		}
		client := &http.Client{Timeout: 30 * time.Second}
		for _, tt := range []struct {
			name string
			body []byte
			want string
		}{
			{"empty Nodes items", body(`{"Nodes":{"items":[`, `{}`, `]}}`), "configure this extender with nodeCacheCapable: true"},
			{"a pod of empty containers", body(`{"Pod":{"spec":{"containers":[`, `{}`, `]}},"NodeNames":[]}`), "Pod.spec.containers: more than 256 containers"},
		} {
			before := vmHWM(t, pid)
			start := time.Now()
			resp, err := client.Post(url+"/filter", "application/json", bytes.NewReader(tt.body))
			if err != nil {
				t.Fatalf("%s: %v", tt.name, err)
			}
			answer := readAll(resp)
			took := time.Since(start)
			after := vmHWM(t, pid)
			t.Logf("%s: %d bytes answered %d in %s; extender peak RSS %d MiB before, %d MiB after", tt.name, len(tt.body), resp.StatusCode, took.Round(time.Millisecond), before>>20, after>>20)
			if resp.StatusCode != http.StatusBadRequest || !strings.Contains(answer, tt.want) {
				t.Errorf("%s: %d %.300q, want a 400 saying %q", tt.name, resp.StatusCode, answer, tt.want)
			}
			if after >= 200<<20 {
				t.Errorf("%s: extender peak RSS %d MiB, want under 200 MiB", tt.name, after>>20)
			}
		}
		// Positive control: the real kube-scheduler places a reclaimed pod
		// through the extender after the attack.
		p := reclaimedPod("attack", "after-s9", "attack", 1000, gib)
		p.Spec.SchedulerName = extender.SchedulerName
		framework.CreatePod(t, c, p)
		if _, ok := framework.Poll(time.Minute, 200*time.Millisecond, func() bool { return stored("after-s9").Spec.NodeName != "" }); !ok {
			t.Fatal("kube-scheduler did not place a reclaimed pod through the extender after the attack")
		}
		if !framework.Ready(ext.HealthPort) {
			t.Error("the extender is not ready after the attack")
		}
	})
}

// vmHWM reads the peak resident set size (bytes) of process pid.
func vmHWM(t *testing.T, pid int) int64 {
	t.Helper()
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if rest, ok := strings.CutPrefix(s.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			if err != nil {
				t.Fatalf("VmHWM %q: %v", rest, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmHWM in /proc/%d/status", pid)
	return 0
}
