package integration

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/tls"
	"fmt"
	"io"
	"maps"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/kube-reclaim/kube-reclaim/deploy"
	"github.com/kube-reclaim/kube-reclaim/enforcement"
	"github.com/kube-reclaim/kube-reclaim/extender"
	"github.com/kube-reclaim/kube-reclaim/internal/leaderlease"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
	"github.com/kube-reclaim/kube-reclaim/test/cluster"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
	"github.com/kube-reclaim/kube-reclaim/test/stack"
)

// A role's /metrics tells per-node room: only callers the API server
// authenticates and allows to get the non-resource URL /metrics read it, and
// the plain probe port has no metrics at all.
func TestMetricsNeedAuthorizedCaller(t *testing.T) {
	ctx := context.Background()
	const ns = "metrics-auth"
	c := apiOnlyCluster(t, ns)
	port, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	role := framework.StartRole(t, c, "extender", "extender", fmt.Sprintf("--listen-address=127.0.0.1:%d", port), "--publisher-lease-name=")
	ep, ok := stack.MetricsOf(role.HealthPort)
	if !ok {
		t.Fatal("StartRole registered no metrics endpoint")
	}
	metricsURL := fmt.Sprintf("https://127.0.0.1:%d/metrics", ep.Port)

	// A scraper bound to the ClusterRole deploy/ ships for scrapers, and an
	// account without it.
	reader := shippedClusterRole(t, "kube-reclaim-metrics-reader")
	if _, err := c.Client.RbacV1().ClusterRoles().Create(ctx, reader, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "metrics-auth-test-scraper"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "scraper"}}}
	if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	scraper, other := saToken(t, c, ns, "scraper"), saToken(t, c, ns, "other")
	// The role caches a denial for a while: ask the API server first that
	// the binding is in force, so the positive control cannot meet one.
	if _, ok := framework.Poll(30*time.Second, 200*time.Millisecond, func() bool {
		return allowedMetrics(t, c, "system:serviceaccount:"+ns+":scraper")
	}); !ok {
		t.Fatal("the API server never allowed the bound ServiceAccount to get /metrics")
	}
	if allowedMetrics(t, c, "system:serviceaccount:"+ns+":other") {
		t.Fatal("the unbound ServiceAccount may get /metrics: the 403 case would prove nothing")
	}

	for _, tc := range []struct {
		name, url, token string
		code             int
		body             string
	}{
		{name: "no token is unauthorized", url: metricsURL, code: http.StatusUnauthorized, body: "needs a bearer token"},
		{name: "a token the API server does not know is unauthorized", url: metricsURL, token: "forged-token", code: http.StatusUnauthorized,
			body: "did not accept the bearer token"},
		{name: "an account without the ClusterRole is forbidden", url: metricsURL, token: other, code: http.StatusForbidden,
			body: `user "system:serviceaccount:metrics-auth:other" may not get /metrics`},
		{name: "an account bound to the ClusterRole reads the role's metrics", url: metricsURL, token: scraper, code: http.StatusOK,
			body: "kube_reclaim_extender_"},
		{name: "the plain probe port has no metrics", url: fmt.Sprintf("http://127.0.0.1:%d/metrics", role.HealthPort), token: scraper,
			code: http.StatusNotFound},
		{name: "the plain probe port answers probes", url: fmt.Sprintf("http://127.0.0.1:%d/readyz", role.HealthPort), code: http.StatusOK, body: "ok"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, body, err := stack.GetHTTPS(ctx, tc.url, tc.token)
			if err != nil {
				t.Fatal(err)
			}
			if code != tc.code || !strings.Contains(string(body), tc.body) {
				t.Errorf("GET %s: %d %.300q, want %d with %q", tc.url, code, body, tc.code, tc.body)
			}
			if code != http.StatusOK && strings.Contains(string(body), "kube_reclaim_") {
				t.Errorf("GET %s: refused, yet the body holds metrics", tc.url)
			}
		})
	}

	// Every outcome is counted; this scrape, with the admin's token, counts
	// itself as allowed.
	body, err := stack.GetMetrics(ctx, ep)
	if err != nil {
		t.Fatal(err)
	}
	for outcome, want := range map[string]float64{"no-token": 1, "invalid-token": 1, "denied": 1, "allowed": 2, "authentication-error": 0} {
		got, err := framework.SumSamples(bytes.NewReader(body), "kube_reclaim_metrics_requests_total", "outcome", outcome)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("kube_reclaim_metrics_requests_total{outcome=%q} = %v, want %v", outcome, got, want)
		}
	}

	// The same, scraped as components/monitoring configures it, on this
	// cluster (metrics_scrape_test.go).
	checkVerifiedScrape(t, c, ns, "scraper")
}

// shippedClusterRole returns the ClusterRole name of deploy/default.
func shippedClusterRole(t *testing.T, name string) *rbacv1.ClusterRole {
	t.Helper()
	objs, err := deploy.Objects("default")
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range objs {
		if u.GetKind() == "ClusterRole" && u.GetName() == name {
			var role rbacv1.ClusterRole
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &role); err != nil {
				t.Fatal(err)
			}
			return &role
		}
	}
	t.Fatalf("deploy/default has no ClusterRole %s", name)
	return nil
}

// saToken creates the ServiceAccount ns/name and returns a token of it.
func saToken(t *testing.T, c *cluster.Cluster, ns, name string) string {
	t.Helper()
	ctx := context.Background()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	if _, err := c.Client.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := c.Client.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("token of %s/%s: %v", ns, name, err)
	}
	return tr.Status.Token
}

// allowedMetrics asks the API server whether user may get /metrics.
func allowedMetrics(t *testing.T, c *cluster.Cluster, user string) bool {
	t.Helper()
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: user,
		Groups:                []string{"system:serviceaccounts", "system:authenticated"},
		NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}}}
	got, err := c.Client.AuthorizationV1().SubjectAccessReviews().Create(context.Background(), sar, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got.Status.Allowed
}

// floodCounts counts the answers a flood got, by status code (0: a
// transport error).
type floodCounts struct {
	mu    sync.Mutex
	codes map[int]int
}

func (f *floodCounts) add(code int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.codes[code]++
}

func (f *floodCounts) get() map[int]int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return maps.Clone(f.codes)
}

// floodTokens sends GET url from conns connections at once, each with a
// new random bearer token, one request after another per connection, as
// fast as the server answers, until ctx ends; wait returns once every
// connection has stopped.
func floodTokens(ctx context.Context, url string, conns int) (counts *floodCounts, wait func()) {
	counts = &floodCounts{codes: map[int]int{}}
	// A TLS configuration of its own turns HTTP/2 off: every request in
	// flight has a connection of its own, as conns attackers would.
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // the roles' self-signed metrics certificates
		MaxConnsPerHost: conns, MaxIdleConnsPerHost: conns}}
	var wg sync.WaitGroup
	for range conns {
		wg.Go(func() {
			for ctx.Err() == nil {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
				if err != nil {
					panic(err)
				}
				req.Header.Set("Authorization", "Bearer "+rand.Text())
				resp, err := client.Do(req)
				if err != nil {
					if ctx.Err() == nil {
						counts.add(0)
						time.Sleep(10 * time.Millisecond) // a refused dial would spin
					}
					continue
				}
				_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
				resp.Body.Close()
				counts.add(resp.StatusCode)
			}
		})
	}
	return counts, func() { wg.Wait(); client.CloseIdleConnections() }
}

// S8 (issue 39): a flood of random bearer tokens at the metrics ports of the
// leading publisher and of the extender, from 400 connections at each, for
// a minute, starves neither role. Each unseen token needs a TokenReview;
// before, those went through the role's own client (and its rate limit,
// shared with the Lease renewals), with no cap on how many waited, and the
// publisher lost its Lease and exited. Now they go through a client of their
// own and at most --metrics-auth-max-in-flight at once, the rest answered
// 429: the publisher keeps its Lease at every look, a reclaimed pod is
// placed by the real kube-scheduler through the extender during the flood,
// and a scraper still reads the metrics.
func TestMetricsTokenFloodStarvesNoRole(t *testing.T) {
	ctx := context.Background()
	const (
		ns    = "metrics-flood"
		conns = 400
		flood = 60 * time.Second
	)
	extPort, err := cluster.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	c := cluster.StartForTest(t, cluster.Options{MetricResolution: 10 * time.Second,
		SchedulerConfig: schedulerConfigFor(t, fmt.Sprintf("http://127.0.0.1:%d", extPort))})
	framework.CreateNamespace(t, c, ns)
	framework.CreateNamespace(t, c, leaderlease.DefaultNamespace)
	nodes := framework.AddReadyNodes(t, c, 2, cluster.NodeSpec{NamePrefix: "flood"}, time.Minute)

	// Two publishers on the shipped Lease (the defaults: 15 s, renewed
	// within 10 s, retried every 2 s): a lost Lease would change hands.
	pubArgs := func(id string) []string { return []string{"--leader-elect-identity=" + id, "--period=5s"} }
	pubA := framework.StartRole(t, c, "publisher-a", "publisher", pubArgs("publisher-a")...)
	lease := func() (*coordinationv1.Lease, error) {
		return c.Client.CoordinationV1().Leases(leaderlease.DefaultNamespace).Get(ctx, leaderlease.DefaultName, metav1.GetOptions{})
	}
	if _, ok := framework.Poll(30*time.Second, 200*time.Millisecond, func() bool {
		l, err := lease()
		return err == nil && holder(l) == "publisher-a"
	}); !ok {
		t.Fatal("publisher-a never took the Lease")
	}
	pubB := framework.StartRole(t, c, "publisher-b", "publisher", pubArgs("publisher-b")...)
	// The extender tracks the publisher's Lease (the default): a lapse
	// would count every node as zero, and the pod would stay Pending.
	ext := framework.StartRole(t, c, "extender", "extender", fmt.Sprintf("--listen-address=127.0.0.1:%d", extPort))

	// A pod the published room takes, once the publisher has published it
	// and the extender has seen it.
	const podCPU, podMem = int64(500), int64(512 << 20)
	if _, ok := framework.Poll(3*time.Minute, time.Second, func() bool {
		for _, n := range nodes {
			if room := framework.View(t, c, n, reclaimable.DefaultStaleAfter).Published(); room.CPUMilli < podCPU || room.MemoryBytes < podMem {
				return false
			}
		}
		return ext.Metric(t, "kube_reclaim_extender_cached_nodes") >= float64(len(nodes))
	}); !ok {
		t.Fatalf("the publisher never published room for a %dm / %d B pod on %v\n%s", podCPU, podMem, nodes, c.LogTails())
	}

	// Scrapers: one bound to the shipped ClusterRole (its answers cached
	// before the flood), one bound only after it (reviewed afresh), one
	// without the grant.
	reader := shippedClusterRole(t, "kube-reclaim-metrics-reader")
	if _, err := c.Client.RbacV1().ClusterRoles().Create(ctx, reader, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "metrics-flood-scrapers"},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: reader.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "scraper"},
			{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "late-scraper"}}}
	if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	scraper, late, other := saToken(t, c, ns, "scraper"), saToken(t, c, ns, "late-scraper"), saToken(t, c, ns, "other")
	if _, ok := framework.Poll(30*time.Second, 200*time.Millisecond, func() bool {
		return allowedMetrics(t, c, "system:serviceaccount:"+ns+":scraper") && allowedMetrics(t, c, "system:serviceaccount:"+ns+":late-scraper")
	}); !ok {
		t.Fatal("the API server never allowed the bound ServiceAccounts to get /metrics")
	}
	roles := map[string]*framework.Role{"publisher-a": pubA, "extender": ext}
	urls := map[string]string{}
	for name, r := range roles {
		ep, ok := stack.MetricsOf(r.HealthPort)
		if !ok {
			t.Fatalf("%s registered no metrics endpoint", name)
		}
		urls[name] = fmt.Sprintf("https://127.0.0.1:%d/metrics", ep.Port)
		// The scraper's and the test's own (admin) answers are cached now.
		if code, body, err := stack.GetHTTPS(ctx, urls[name], scraper); err != nil || code != http.StatusOK {
			t.Fatalf("%s before the flood: the scraper got %d %.200q %v", name, code, body, err)
		}
		r.Metric(t, "kube_reclaim_metrics_requests_total", "outcome", "allowed")
	}
	before, err := lease()
	if err != nil {
		t.Fatal(err)
	}
	transitions := ptr.Deref(before.Spec.LeaseTransitions, 0)

	floodCtx, stopFlood := context.WithTimeout(ctx, flood)
	defer stopFlood()
	counts := map[string]*floodCounts{}
	var waits []func()
	for name, url := range urls {
		f, wait := floodTokens(floodCtx, url, conns)
		counts[name], waits = f, append(waits, wait)
	}
	start := time.Now()

	// During the flood: the scrapers read on (the cached one at once; 429s
	// are allowed, a refusal or an error is not), the ungranted caller never
	// reads, and a reclaimed pod is placed.
	type scrape struct {
		role, who string
		code      int
		err       error
		at        time.Duration
	}
	var (
		scrapesMu sync.Mutex
		scrapes   []scrape
	)
	var during sync.WaitGroup
	during.Go(func() {
		time.Sleep(flood / 4)
		for time.Since(start) < flood-5*time.Second {
			for name, url := range urls {
				for who, token := range map[string]string{"scraper": scraper, "other": other} {
					code, _, err := stack.GetHTTPS(ctx, url, token)
					scrapesMu.Lock()
					scrapes = append(scrapes, scrape{role: name, who: who, code: code, err: err, at: time.Since(start)})
					scrapesMu.Unlock()
				}
			}
			time.Sleep(2 * time.Second)
		}
	})
	const podName = "batch-during-flood"
	during.Go(func() {
		time.Sleep(flood / 3)
		p := framework.ReclaimedPod(ns, podName, podCPU, podMem)
		p.Spec.SchedulerName = extender.SchedulerName
		if _, err := enforcement.Enforce(&p.Spec, framework.Names); err != nil {
			t.Error(err)
			return
		}
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Errorf("creating %s during the flood: %v", podName, err)
		}
	})

	// At every look of the flood: publisher-a holds a Lease renewed within
	// its duration, with no transition. The control, once the flood is
	// over: publisher-a is stopped, and the same look must see publisher-b
	// take the Lease.
	var (
		controlRan atomic.Bool
		boundAt    = time.Duration(-1)
	)
	report := framework.ExpectAbsence(t, framework.Absence{
		Window: flood, Every: time.Second, ControlAt: flood, ControlWithin: time.Minute,
		Control: func() error {
			controlRan.Store(true)
			stopFlood()
			for _, wait := range waits {
				wait()
			}
			return c.StopComponent("publisher-a")
		},
		Look: func(elapsed time.Duration) ([]string, bool) {
			if boundAt < 0 {
				if p, err := c.Client.CoreV1().Pods(ns).Get(ctx, podName, metav1.GetOptions{}); err == nil && p.Spec.NodeName != "" {
					boundAt = elapsed
				}
			}
			l, err := lease()
			if err != nil {
				return []string{fmt.Sprintf("reading the Lease: %v", err)}, false
			}
			if controlRan.Load() {
				return nil, holder(l) == "publisher-b"
			}
			var v []string
			if h := holder(l); h != "publisher-a" {
				v = append(v, fmt.Sprintf("the Lease is held by %q", h))
			}
			if n := ptr.Deref(l.Spec.LeaseTransitions, 0); n != transitions {
				v = append(v, fmt.Sprintf("leaseTransitions %d, was %d", n, transitions))
			}
			if l.Spec.RenewTime == nil || time.Since(l.Spec.RenewTime.Time) > time.Duration(ptr.Deref(l.Spec.LeaseDurationSeconds, 0))*time.Second {
				v = append(v, fmt.Sprintf("the Lease lapsed: renewed %v, duration %ds", l.Spec.RenewTime, ptr.Deref(l.Spec.LeaseDurationSeconds, 0)))
			}
			return v, false
		},
	})
	during.Wait()
	bound := "never"
	if boundAt >= 0 {
		bound = fmt.Sprintf("%.1fs into it", boundAt.Seconds())
	}
	t.Logf("flood of %s from %d connections per port: %d looks, max gap %s; pod created %s into it, bound %s; answers: publisher %v, extender %v",
		flood, conns, report.Looks, report.MaxGap.Round(time.Millisecond), flood/3, bound, counts["publisher-a"].get(), counts["extender"].get())

	if boundAt < 0 || boundAt > flood {
		t.Errorf("%s was not bound during the flood (bound at %v)\n%s", podName, boundAt, c.LogTails())
	}
	// The flood really hit the cap on both roles, and never read metrics.
	for name, f := range counts {
		got := f.get()
		if got[http.StatusOK] != 0 {
			t.Errorf("%s: %d random tokens read the metrics", name, got[http.StatusOK])
		}
		if got[http.StatusTooManyRequests] == 0 || got[http.StatusUnauthorized] == 0 {
			t.Errorf("%s answered the flood %v: want both 401s (reviewed) and 429s (the cap reached), or the flood proved nothing", name, got)
		}
	}
	scrapesMu.Lock()
	defer scrapesMu.Unlock()
	okScrapes := map[string]int{}
	for _, s := range scrapes {
		switch {
		case s.who == "scraper" && s.code == http.StatusOK:
			okScrapes[s.role]++
		case s.who == "scraper" && s.code == http.StatusTooManyRequests:
		case s.who == "other" && (s.code == http.StatusForbidden || s.code == http.StatusTooManyRequests):
		default:
			t.Errorf("[%5.1fs] %s's metrics to %s during the flood: %d %v", s.at.Seconds(), s.role, s.who, s.code, s.err)
		}
	}
	for name := range urls {
		if okScrapes[name] == 0 {
			t.Errorf("the scraper never read %s's metrics during the flood", name)
		}
	}

	// After the flood, the reviews go on: a token never seen is reviewed
	// (the extender; publisher-a is stopped, publisher-b serves), the
	// ungranted caller is refused, a forged token too.
	pubBEp, _ := stack.MetricsOf(pubB.HealthPort)
	for name, url := range map[string]string{"extender": urls["extender"], "publisher-b": fmt.Sprintf("https://127.0.0.1:%d/metrics", pubBEp.Port)} {
		for _, tc := range []struct {
			who, token string
			code       int
		}{{"late-scraper", late, http.StatusOK}, {"other", other, http.StatusForbidden}, {"forged", rand.Text(), http.StatusUnauthorized}} {
			var code int
			if _, ok := framework.Poll(20*time.Second, 500*time.Millisecond, func() bool {
				var err error
				code, _, err = stack.GetHTTPS(ctx, url, tc.token)
				return err == nil && code != http.StatusTooManyRequests
			}); !ok || code != tc.code {
				t.Errorf("%s after the flood, %s: %d, want %d", name, tc.who, code, tc.code)
			}
		}
	}
	if got := ext.Metric(t, "kube_reclaim_extender_binds_total", "result", "success"); got < 1 {
		t.Errorf("the extender bound %v pods: %s was not placed through it", got, podName)
	}
	if got := ext.Metric(t, "kube_reclaim_metrics_requests_total", "outcome", "throttled"); got == 0 {
		t.Error("the extender counted no throttled request")
	}
}
