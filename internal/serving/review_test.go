package serving

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/clientcmd"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/kube-reclaim/kube-reclaim/internal/serving/servingtest"
)

func TestBearerTokenParsesOnlyTheBearerScheme(t *testing.T) {
	for _, tc := range []struct {
		header, token string
		ok            bool
	}{
		{header: "Bearer abc", token: "abc", ok: true},
		{header: "bearer  abc ", token: "abc", ok: true},
		{header: "", ok: false},
		{header: "Bearer", ok: false},
		{header: "Bearer ", ok: false},
		{header: "Basic YWRtaW46YWRtaW4=", ok: false},
	} {
		token, ok := bearerToken(tc.header)
		if ok != tc.ok || (ok && token != tc.token) {
			t.Errorf("bearerToken(%q) = %q, %v, want %q, %v", tc.header, token, ok, tc.token, tc.ok)
		}
	}
}

// reviewAPI answers the Reviewer's TokenReviews from a fake clientset
// (which answers one at a time; servingtest.ReviewAPI holds reviews in
// flight): tokens in users are authenticated as that user, every other one
// is refused.
type reviewAPI struct {
	client  *fake.Clientset
	users   map[string]string
	reviews atomic.Int64
}

func newReviewAPI(users map[string]string) *reviewAPI {
	a := &reviewAPI{client: fake.NewClientset(), users: users}
	a.client.PrependReactor("create", "tokenreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		a.reviews.Add(1)
		review := action.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
		if user, ok := a.users[review.Spec.Token]; ok {
			review.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: user}}
		}
		return true, review, nil
	})
	a.client.PrependReactor("create", "subjectaccessreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
		review := action.(k8stesting.CreateAction).GetObject().(*authorizationv1.SubjectAccessReview).DeepCopy()
		review.Status.Allowed = review.Spec.User == "scraper"
		return true, review, nil
	})
	return a
}

// reviewerOn returns a Reviewer over a whose caches run on clk.
func reviewerOn(a *reviewAPI, maxInFlight int, clk cache.Clock) (*Reviewer, *prometheus.Registry) {
	reg := prometheus.NewRegistry()
	return newReviewer(a.client, maxInFlight, nil, reg, func(n int) *cache.LRUExpireCache { return cache.NewLRUExpireCacheWithClock(n, clk) }), reg
}

// heldReviewer returns a Reviewer over api, whose reviews Hold can keep in
// flight, with no client-side rate limit.
func heldReviewer(t *testing.T, api *servingtest.ReviewAPI, maxInFlight int) (*Reviewer, *prometheus.Registry) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", api.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS = -1
	reg := prometheus.NewRegistry()
	return NewReviewer(kubernetes.NewForConfigOrDie(cfg), maxInFlight, nil, reg), reg
}

func TestReviewerCachesRefusedTokensUntilTheyExpire(t *testing.T) {
	a := newReviewAPI(nil)
	clk := clocktesting.NewFakeClock(time.Now())
	r, reg := reviewerOn(a, 1, clk)
	ctx := context.Background()
	for i := range 5 {
		if _, ok, err := r.Authenticate(ctx, "forged"); ok || err != nil {
			t.Fatalf("attempt %d: ok %v, err %v; want refused", i, ok, err)
		}
	}
	if got := a.reviews.Load(); got != 1 {
		t.Errorf("%d TokenReviews for one forged token sent 5 times, want 1", got)
	}
	if got := testutil.ToFloat64(r.reviews.WithLabelValues(ReviewToken, FromCache)); got != 4 {
		t.Errorf("kube_reclaim_metrics_reviews_total{review=%q,from=%q} = %v, want 4", ReviewToken, FromCache, got)
	}
	clk.Step(authnRefusedTTL - time.Second)
	if _, _, _ = r.Authenticate(ctx, "forged"); a.reviews.Load() != 1 {
		t.Errorf("the refusal expired before %s", authnRefusedTTL)
	}
	clk.Step(2 * time.Second)
	if _, _, _ = r.Authenticate(ctx, "forged"); a.reviews.Load() != 2 {
		t.Errorf("%d TokenReviews: the refusal was still cached %s after it", a.reviews.Load(), authnRefusedTTL+time.Second)
	}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP kube_reclaim_metrics_reviews_total Reviews the metrics server needed, by kind (TokenReview, SubjectAccessReview) and where the answer came from (cache, api-server, shared with an identical review in flight, throttled: none sent, the request got 429).
# TYPE kube_reclaim_metrics_reviews_total counter
kube_reclaim_metrics_reviews_total{from="api-server",review="SubjectAccessReview"} 0
kube_reclaim_metrics_reviews_total{from="api-server",review="TokenReview"} 2
kube_reclaim_metrics_reviews_total{from="cache",review="SubjectAccessReview"} 0
kube_reclaim_metrics_reviews_total{from="cache",review="TokenReview"} 5
kube_reclaim_metrics_reviews_total{from="shared",review="SubjectAccessReview"} 0
kube_reclaim_metrics_reviews_total{from="shared",review="TokenReview"} 0
kube_reclaim_metrics_reviews_total{from="throttled",review="SubjectAccessReview"} 0
kube_reclaim_metrics_reviews_total{from="throttled",review="TokenReview"} 0
`), "kube_reclaim_metrics_reviews_total"); err != nil {
		t.Error(err)
	}
}

func TestReviewerCachesStayBoundedAndKeepAcceptedTokensThroughAFlood(t *testing.T) {
	a := newReviewAPI(map[string]string{"good": "scraper"})
	r, _ := reviewerOn(a, 1, clocktesting.NewFakeClock(time.Now()))
	ctx := context.Background()
	if _, ok, err := r.Authenticate(ctx, "good"); !ok || err != nil {
		t.Fatalf("the scraper's token: ok %v, err %v", ok, err)
	}
	const flood = 3 * reviewCacheSize
	for i := range flood {
		if _, ok, err := r.Authenticate(ctx, fmt.Sprintf("random-%d", i)); ok || err != nil {
			t.Fatalf("random token %d: ok %v, err %v; want refused", i, ok, err)
		}
	}
	if got := len(r.refused.Keys()); got > reviewCacheSize {
		t.Errorf("%d refused tokens cached after %d, want at most %d", got, flood, reviewCacheSize)
	}
	if got := a.reviews.Load(); got != 1+flood {
		t.Errorf("%d TokenReviews, want one per distinct token (%d)", got, 1+flood)
	}
	// The flood evicted only refused tokens: the scraper's is still cached.
	if user, ok, err := r.Authenticate(ctx, "good"); !ok || err != nil || user.Username != "scraper" {
		t.Errorf("the scraper's token after the flood: %q ok %v err %v", user.Username, ok, err)
	}
	if got := a.reviews.Load(); got != 1+flood {
		t.Errorf("the scraper's token was reviewed again after the flood: its acceptance was evicted by forged tokens")
	}
}

// authenticateAsync runs r.Authenticate(token) in a goroutine and returns
// its error on the channel.
func authenticateAsync(r *Reviewer, token string) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, _, err := r.Authenticate(context.Background(), token)
		done <- err
	}()
	return done
}

// waitInFlight waits until api has n reviews in flight.
func waitInFlight(t *testing.T, api *servingtest.ReviewAPI, n int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for api.InFlight.Load() != n {
		if time.Now().After(deadline) {
			t.Fatalf("%d reviews in flight, want %d", api.InFlight.Load(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func TestReviewerAnswers429BeyondTheCapOfReviewsInFlight(t *testing.T) {
	const maxInFlight = 3
	api := servingtest.NewReviewAPI(t)
	r, reg := heldReviewer(t, api, maxInFlight)
	h := NewAuthorizedHandler(r, reg, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("metrics")) }))
	get := func(token string) *httptest.ResponseRecorder {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodGet, MetricsPath, nil)
		req.Header.Set("Authorization", "Bearer "+token)
		h.ServeHTTP(rec, req)
		return rec
	}
	// A scraper whose answers are cached before the reviews fill up.
	if rec := get(servingtest.AllowedToken); rec.Code != http.StatusOK {
		t.Fatalf("the scraper before the cap is reached: %d %s", rec.Code, rec.Body)
	}
	release := api.Hold()
	defer release()
	held := make([]<-chan error, maxInFlight)
	for i := range held {
		held[i] = authenticateAsync(r, fmt.Sprintf("held-%d", i))
	}
	waitInFlight(t, api, maxInFlight)

	rec := get("one-more")
	if rec.Code != http.StatusTooManyRequests || rec.Header().Get("Retry-After") == "" || !strings.Contains(rec.Body.String(), "too many") {
		t.Errorf("review %d with %d in flight: %d %q (Retry-After %q), want 429 with Retry-After", maxInFlight+1, maxInFlight, rec.Code, rec.Body, rec.Header().Get("Retry-After"))
	}
	if got := api.TokenReviews.Load(); got != 1+maxInFlight {
		t.Errorf("%d TokenReviews sent, want %d: the 429 must send none", got, 1+maxInFlight)
	}
	// The positive control: a cached scraper needs no slot and reads on.
	if rec := get(servingtest.AllowedToken); rec.Code != http.StatusOK || rec.Body.String() != "metrics" {
		t.Errorf("the cached scraper while the cap is reached: %d %q, want 200", rec.Code, rec.Body)
	}
	release()
	for i, done := range held {
		if err := <-done; err != nil {
			t.Errorf("held review %d: %v", i, err)
		}
	}
	// Slots are given back: the refused request is reviewed now.
	if rec := get("one-more"); rec.Code != http.StatusUnauthorized {
		t.Errorf("the 429'd token once the reviews ended: %d %q, want 401", rec.Code, rec.Body)
	}
	for outcome, want := range map[string]float64{OutcomeThrottled: 1, OutcomeAllowed: 2, OutcomeInvalidToken: 1} {
		if got := counterValue(t, reg, "kube_reclaim_metrics_requests_total", outcome); got != want {
			t.Errorf("kube_reclaim_metrics_requests_total{outcome=%q} = %v, want %v", outcome, got, want)
		}
	}
	if got := testutil.ToFloat64(r.reviews.WithLabelValues(ReviewToken, FromNone)); got != 1 {
		t.Errorf("kube_reclaim_metrics_reviews_total{review=%q,from=%q} = %v, want 1", ReviewToken, FromNone, got)
	}
}

func TestReviewerSendsOneReviewForIdenticalRequestsInFlight(t *testing.T) {
	api := servingtest.NewReviewAPI(t)
	release := api.Hold()
	defer release()
	// One slot: a caller that did not share the review in flight would
	// need a second one and be throttled.
	r, _ := heldReviewer(t, api, 1)
	first := authenticateAsync(r, "same")
	waitInFlight(t, api, 1)
	const callers = 20
	others := make([]<-chan error, callers)
	for i := range others {
		others[i] = authenticateAsync(r, "same")
	}
	time.Sleep(100 * time.Millisecond) // let them reach the review in flight
	release()
	for i, done := range append(others, first) {
		if err := <-done; err != nil {
			t.Errorf("caller %d: %v, want the shared refusal", i, err)
		}
	}
	if got := api.TokenReviews.Load(); got != 1 {
		t.Errorf("%d TokenReviews for one token sent by %d callers at once, want 1", got, callers+1)
	}
	if got := testutil.ToFloat64(r.reviews.WithLabelValues(ReviewToken, FromShared)); got == 0 {
		t.Error("no caller counted as sharing the review in flight")
	}
}

// counterValue returns the value of the counter name on reg whose one label
// has value.
func counterValue(t *testing.T, reg *prometheus.Registry, name, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			if mf.GetName() == name && len(m.GetLabel()) == 1 && m.GetLabel()[0].GetValue() == value {
				return m.GetCounter().GetValue()
			}
		}
	}
	t.Fatalf("%s{%q} not registered", name, value)
	return 0
}

// A Reviewer with audiences asks the API server for them and accepts a
// token only when the answer names one of them: a token issued for the API
// server, or an authenticator that ignores spec.audiences (answering none),
// is refused.
func TestReviewerAcceptsOnlyTokensIssuedForItsAudiences(t *testing.T) {
	// Each token's audiences, as the API server's authenticator knows them.
	tokens := map[string][]string{
		"for-metrics":    {"kube-reclaim-metrics"},
		"for-api-server": {"https://kubernetes.default.svc"},
		"for-both":       {"https://kubernetes.default.svc", "kube-reclaim-metrics"},
	}
	for _, tc := range []struct {
		name      string
		audiences []string
		// unaware: the authenticator ignores spec.audiences and answers none.
		unaware bool
		token   string
		want    bool
	}{
		{name: "a token for the metrics audience", audiences: []string{"kube-reclaim-metrics"}, token: "for-metrics", want: true},
		{name: "a token for the API server", audiences: []string{"kube-reclaim-metrics"}, token: "for-api-server", want: false},
		{name: "a token for both", audiences: []string{"kube-reclaim-metrics"}, token: "for-both", want: true},
		{name: "an authenticator that ignores audiences", audiences: []string{"kube-reclaim-metrics"}, unaware: true, token: "for-metrics", want: false},
		{name: "no audiences: the API server's own", token: "for-api-server", want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client := fake.NewClientset()
			var asked []string
			client.PrependReactor("create", "tokenreviews", func(action k8stesting.Action) (bool, runtime.Object, error) {
				review := action.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenReview).DeepCopy()
				asked = review.Spec.Audiences
				has, ok := tokens[review.Spec.Token]
				want := review.Spec.Audiences
				if len(want) == 0 || tc.unaware {
					want = []string{"https://kubernetes.default.svc"}
				}
				var both []string
				for _, a := range has {
					if slices.Contains(want, a) {
						both = append(both, a)
					}
				}
				if ok && len(both) > 0 {
					review.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "scraper"}}
					if !tc.unaware && len(review.Spec.Audiences) > 0 {
						review.Status.Audiences = both
					}
				}
				return true, review, nil
			})
			r := newReviewer(client, 1, tc.audiences, prometheus.NewRegistry(), cache.NewLRUExpireCache)
			_, ok, err := r.Authenticate(context.Background(), tc.token)
			if err != nil {
				t.Fatal(err)
			}
			if ok != tc.want {
				t.Errorf("token %s with audiences %v: accepted %v, want %v", tc.token, tc.audiences, ok, tc.want)
			}
			if !slices.Equal(asked, tc.audiences) {
				t.Errorf("the TokenReview asked for audiences %v, want %v", asked, tc.audiences)
			}
		})
	}
}
