package serving

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	"golang.org/x/sync/semaphore"
	"golang.org/x/sync/singleflight"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-reclaim/kube-reclaim/internal/logsample"
)

// reviewCacheSize bounds each cache. Refused tokens have a cache of their
// own: a flood of forged tokens then costs LRU evictions among forged
// tokens, and never pushes out a scraper's accepted token, which would send
// its next scrape to the API server (and into the cap below) again.
const reviewCacheSize = 1024

// DefaultMaxInFlightReviews is how many reviews a metrics server sends at
// once by default. A scraper whose answers are cached needs none, so the cap
// only meets callers with new tokens: forged ones in bulk, or one scraper
// every cache period.
const DefaultMaxInFlightReviews = 8

// ErrTooManyReviews is returned when MaxInFlightReviews reviews are already
// in flight; the handler answers 429.
var ErrTooManyReviews = errors.New("too many reviews in flight")

// Kinds of review and where their answers come from, as counted by
// kube_reclaim_metrics_reviews_total.
const (
	ReviewToken  = "TokenReview"
	ReviewAccess = "SubjectAccessReview"
	// FromCache: a cached answer; FromAPIServer: a review sent; FromShared:
	// the answer of an identical review already in flight; FromNone: no
	// review sent because the cap was reached.
	FromCache     = "cache"
	FromAPIServer = "api-server"
	FromShared    = "shared"
	FromNone      = "throttled"
)

// Reviewer asks the API server who a bearer token belongs to (TokenReview)
// and whether that user may get MetricsPath (SubjectAccessReview), as
// kube-scheduler's secure port does. It caches both answers for a while,
// refusals included, sends one review for identical concurrent requests,
// and sends at most a fixed number at once: whatever callers send, the
// reviews in flight, and the memory they hold, stay bounded.
type Reviewer struct {
	client kubernetes.Interface
	// audiences a token must have been issued for; none: the API server's
	// own (see SecureMetrics.TokenAudiences).
	audiences []string
	slots     *semaphore.Weighted
	// Identical reviews in flight share one: a token (or user) costs at
	// most one review per cache period, however many connections send it.
	flights  singleflight.Group
	accepted *cache.LRUExpireCache // sha256 of the token → authenticationv1.UserInfo
	refused  *cache.LRUExpireCache // sha256 of the token → struct{}
	access   *cache.LRUExpireCache // the user, as JSON → bool
	reviews  *prometheus.CounterVec
}

// NewReviewer returns a Reviewer that sends its reviews with client, at
// most maxInFlight at once (DefaultMaxInFlightReviews when 0 or less),
// accepts only tokens issued for one of audiences (none: the API server's
// own audiences), and counts the reviews on reg.
func NewReviewer(client kubernetes.Interface, maxInFlight int, audiences []string, reg prometheus.Registerer) *Reviewer {
	return newReviewer(client, maxInFlight, audiences, reg, cache.NewLRUExpireCache)
}

// newReviewer is NewReviewer with the caches made by newCache (tests pass
// caches on a fake clock).
func newReviewer(client kubernetes.Interface, maxInFlight int, audiences []string, reg prometheus.Registerer, newCache func(int) *cache.LRUExpireCache) *Reviewer {
	if maxInFlight <= 0 {
		maxInFlight = DefaultMaxInFlightReviews
	}
	r := &Reviewer{client: client, audiences: slices.Clone(audiences), slots: semaphore.NewWeighted(int64(maxInFlight)),
		accepted: newCache(reviewCacheSize), refused: newCache(reviewCacheSize), access: newCache(reviewCacheSize),
		reviews: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "kube_reclaim",
			Subsystem: "metrics",
			Name:      "reviews_total",
			Help:      "Reviews the metrics server needed, by kind (TokenReview, SubjectAccessReview) and where the answer came from (cache, api-server, shared with an identical review in flight, throttled: none sent, the request got 429).",
		}, []string{"review", "from"})}
	reg.MustRegister(r.reviews)
	for _, kind := range []string{ReviewToken, ReviewAccess} {
		for _, from := range []string{FromCache, FromAPIServer, FromShared, FromNone} {
			r.reviews.WithLabelValues(kind, from)
		}
	}
	return r
}

// review runs send as the one review of key in flight, in a slot: callers
// with the same key meanwhile share its answer; without a free slot it
// returns ErrTooManyReviews at once. The review does not end with the
// caller that started it (others may be waiting for it), only with
// reviewTimeout.
func (r *Reviewer) review(ctx context.Context, kind, key string, send func(context.Context) (any, error)) (any, error) {
	sent := false
	v, err, shared := r.flights.Do(kind+"/"+key, func() (any, error) {
		if !r.slots.TryAcquire(1) {
			return nil, ErrTooManyReviews
		}
		defer r.slots.Release(1)
		sent = true
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), reviewTimeout)
		defer cancel()
		return send(ctx)
	})
	switch {
	case errors.Is(err, ErrTooManyReviews):
		r.reviews.WithLabelValues(kind, FromNone).Inc()
	case sent:
		r.reviews.WithLabelValues(kind, FromAPIServer).Inc()
	case shared:
		r.reviews.WithLabelValues(kind, FromShared).Inc()
	}
	return v, err
}

// Authenticate returns the user of token; ok is false when the API server
// does not accept it, err set when it could not be asked (ErrTooManyReviews
// when the cap is reached).
func (r *Reviewer) Authenticate(ctx context.Context, token string) (user authenticationv1.UserInfo, ok bool, err error) {
	// The caches keep a digest: a heap dump then holds no usable token.
	key := sha256.Sum256([]byte(token))
	if v, found := r.accepted.Get(key); found {
		r.reviews.WithLabelValues(ReviewToken, FromCache).Inc()
		return v.(authenticationv1.UserInfo), true, nil
	}
	if _, found := r.refused.Get(key); found {
		r.reviews.WithLabelValues(ReviewToken, FromCache).Inc()
		return user, false, nil
	}
	v, err := r.review(ctx, ReviewToken, string(key[:]), func(ctx context.Context) (any, error) {
		review, err := r.client.AuthenticationV1().TokenReviews().Create(ctx,
			&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token, Audiences: r.audiences}}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("TokenReview: %w", err)
		}
		if !review.Status.Authenticated || !r.audienceKnown(review.Status.Audiences) {
			r.refused.Add(key, struct{}{}, authnRefusedTTL)
			return nil, nil
		}
		r.accepted.Add(key, review.Status.User, authnCacheTTL)
		return review.Status.User, nil
	})
	if err != nil || v == nil {
		return user, false, err
	}
	return v.(authenticationv1.UserInfo), true, nil
}

// audienceKnown says whether the audiences a TokenReview answered with
// include one the Reviewer asked for. An authenticator that ignores
// spec.audiences answers none: the token is then refused, as the
// TokenReview API asks of a client that sets them, or a token issued for
// the API server (which the scraper could be made to replay elsewhere)
// would pass for one issued for the metrics server.
func (r *Reviewer) audienceKnown(answered []string) bool {
	if len(r.audiences) == 0 {
		return true
	}
	return slices.ContainsFunc(answered, func(a string) bool { return slices.Contains(r.audiences, a) })
}

// accessAnswer is a SubjectAccessReview's answer.
type accessAnswer struct {
	allowed bool
	reason  string
}

// Authorize says whether user may get MetricsPath, and if not, why.
func (r *Reviewer) Authorize(ctx context.Context, user authenticationv1.UserInfo) (allowed bool, reason string, err error) {
	key, err := json.Marshal(user) // map keys sorted: one key per identity
	if err != nil {
		return false, "", err
	}
	if v, found := r.access.Get(string(key)); found {
		r.reviews.WithLabelValues(ReviewAccess, FromCache).Inc()
		return v.(bool), "", nil
	}
	extra := make(map[string]authorizationv1.ExtraValue, len(user.Extra))
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	v, err := r.review(ctx, ReviewAccess, string(key), func(ctx context.Context) (any, error) {
		review, err := r.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
			Spec: authorizationv1.SubjectAccessReviewSpec{User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
				NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: MetricsPath, Verb: "get"}},
		}, metav1.CreateOptions{})
		if err != nil {
			return nil, fmt.Errorf("SubjectAccessReview: %w", err)
		}
		a := accessAnswer{allowed: review.Status.Allowed && !review.Status.Denied, reason: review.Status.Reason}
		ttl := authzAllowTTL
		if !a.allowed {
			ttl = authzDenyTTL
		}
		r.access.Add(string(key), a.allowed, ttl)
		return a, nil
	})
	if err != nil {
		return false, "", err
	}
	a := v.(accessAnswer)
	return a.allowed, a.reason, nil
}

// bearerToken returns the token of an "Authorization: Bearer <token>"
// header; ok is false when there is none or it is malformed.
func bearerToken(h string) (string, bool) {
	scheme, token, found := strings.Cut(strings.TrimSpace(h), " ")
	token = strings.TrimSpace(token)
	return token, found && strings.EqualFold(scheme, "Bearer") && token != ""
}

// retryAfterSeconds is the Retry-After of a 429: about the time the reviews
// in flight take to clear.
const retryAfterSeconds = 1

// NewAuthorizedHandler serves next to callers that r authenticates and
// allows to get MetricsPath. It answers 401 to a request without a bearer
// token or with one the API server does not accept, 403 to a caller not
// allowed, 429 when the request needs a review and r has as many in flight
// as it may, and 503 when the API server could not be asked: never the
// metrics unless allowed. Outcomes are counted on reg.
func NewAuthorizedHandler(r *Reviewer, reg prometheus.Registerer, next http.Handler) http.Handler {
	outcomes := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "kube_reclaim",
		Subsystem: "metrics",
		Name:      "requests_total",
		Help:      "Requests to the metrics server by outcome of authentication and authorization.",
	}, []string{"outcome"})
	reg.MustRegister(outcomes)
	for _, o := range []string{OutcomeAllowed, OutcomeNoToken, OutcomeInvalidToken, OutcomeDenied, OutcomeThrottled, OutcomeAuthnError, OutcomeAuthzError} {
		outcomes.WithLabelValues(o)
	}
	unauthorized := func(w http.ResponseWriter, outcome, msg string) {
		outcomes.WithLabelValues(outcome).Inc()
		w.Header().Set("WWW-Authenticate", `Bearer realm="kube-reclaim metrics"`)
		http.Error(w, "Unauthorized: "+msg, http.StatusUnauthorized)
	}
	// A full cap is what a flood looks like: it is counted, not logged, so
	// the flood cannot fill the logs either.
	throttled := func(w http.ResponseWriter, what string) {
		outcomes.WithLabelValues(OutcomeThrottled).Inc()
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
		http.Error(w, "Too Many Requests: too many "+what+"s in flight; retry later", http.StatusTooManyRequests)
	}
	// A review that fails, fails for every caller at once (the API server
	// or the reviews' client is out): a few lines a second say so.
	errLogs := logsample.Default()
	logErr := func(req *http.Request, err error, fields logrus.Fields, msg string) {
		if log, ok := errLogs.Allow(logrus.WithFields(logrus.Fields{"remote": req.RemoteAddr, "path": req.URL.Path})); ok {
			log.WithError(err).WithFields(fields).Warn(msg)
		}
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		header := req.Header.Get("Authorization")
		token, ok := bearerToken(header)
		if !ok {
			if header == "" {
				unauthorized(w, OutcomeNoToken, MetricsPath+" needs a bearer token (Authorization: Bearer <token>) of an identity allowed to get "+MetricsPath)
			} else {
				unauthorized(w, OutcomeInvalidToken, "the Authorization header is not \"Bearer <token>\"")
			}
			return
		}
		user, ok, err := r.Authenticate(req.Context(), token)
		switch {
		case errors.Is(err, ErrTooManyReviews):
			throttled(w, ReviewToken)
			return
		case err != nil:
			outcomes.WithLabelValues(OutcomeAuthnError).Inc()
			logErr(req, err, nil, "metrics request: the bearer token could not be reviewed")
			http.Error(w, "Service Unavailable: the bearer token could not be reviewed: "+err.Error(), http.StatusServiceUnavailable)
			return
		case !ok:
			unauthorized(w, OutcomeInvalidToken, "the API server did not accept the bearer token (TokenReview)")
			return
		}
		allowed, reason, err := r.Authorize(req.Context(), user)
		switch {
		case errors.Is(err, ErrTooManyReviews):
			throttled(w, ReviewAccess)
			return
		case err != nil:
			outcomes.WithLabelValues(OutcomeAuthzError).Inc()
			logErr(req, err, logrus.Fields{"user": user.Username}, "metrics request: access could not be reviewed")
			http.Error(w, "Service Unavailable: access could not be reviewed: "+err.Error(), http.StatusServiceUnavailable)
			return
		case !allowed:
			outcomes.WithLabelValues(OutcomeDenied).Inc()
			msg := fmt.Sprintf("Forbidden: user %q may not get %s: it needs a ClusterRole granting get on nonResourceURLs [%q] (deploy/ ships kube-reclaim-metrics-reader)",
				user.Username, MetricsPath, MetricsPath)
			if reason != "" {
				msg += ": " + reason
			}
			http.Error(w, msg, http.StatusForbidden)
			return
		}
		outcomes.WithLabelValues(OutcomeAllowed).Inc()
		next.ServeHTTP(w, req)
	})
}
