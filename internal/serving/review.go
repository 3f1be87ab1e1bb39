package serving

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/sirupsen/logrus"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/kubernetes"
)

// reviewCacheSize bounds each cache: forged tokens are cached as rejected
// too, so that a flood of them costs LRU evictions rather than memory.
const reviewCacheSize = 1024

// Reviewer asks the API server who a bearer token belongs to (TokenReview)
// and whether that user may get MetricsPath (SubjectAccessReview), as
// kube-scheduler's secure port does, and caches both answers for a while.
type Reviewer struct {
	client kubernetes.Interface
	tokens *cache.LRUExpireCache // sha256 of the token → tokenResult
	access *cache.LRUExpireCache // the user, as JSON → bool
}

type tokenResult struct {
	user          authenticationv1.UserInfo
	authenticated bool
}

// NewReviewer returns a Reviewer that sends its reviews with client.
func NewReviewer(client kubernetes.Interface) *Reviewer {
	return &Reviewer{client: client, tokens: cache.NewLRUExpireCache(reviewCacheSize), access: cache.NewLRUExpireCache(reviewCacheSize)}
}

// Authenticate returns the user of token; ok is false when the API server
// does not accept it, err set when it could not be asked.
func (r *Reviewer) Authenticate(ctx context.Context, token string) (user authenticationv1.UserInfo, ok bool, err error) {
	// The cache keeps a digest: a heap dump then holds no usable token.
	key := sha256.Sum256([]byte(token))
	if v, found := r.tokens.Get(key); found {
		res := v.(tokenResult)
		return res.user, res.authenticated, nil
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	review, err := r.client.AuthenticationV1().TokenReviews().Create(ctx,
		&authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return user, false, fmt.Errorf("TokenReview: %w", err)
	}
	res := tokenResult{user: review.Status.User, authenticated: review.Status.Authenticated}
	r.tokens.Add(key, res, authnCacheTTL)
	return res.user, res.authenticated, nil
}

// Authorize says whether user may get MetricsPath, and if not, why.
func (r *Reviewer) Authorize(ctx context.Context, user authenticationv1.UserInfo) (allowed bool, reason string, err error) {
	key, err := json.Marshal(user) // map keys sorted: one key per identity
	if err != nil {
		return false, "", err
	}
	if v, found := r.access.Get(string(key)); found {
		return v.(bool), "", nil
	}
	extra := make(map[string]authorizationv1.ExtraValue, len(user.Extra))
	for k, v := range user.Extra {
		extra[k] = authorizationv1.ExtraValue(v)
	}
	ctx, cancel := context.WithTimeout(ctx, reviewTimeout)
	defer cancel()
	review, err := r.client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{User: user.Username, UID: user.UID, Groups: user.Groups, Extra: extra,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: MetricsPath, Verb: "get"}},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, "", fmt.Errorf("SubjectAccessReview: %w", err)
	}
	allowed = review.Status.Allowed && !review.Status.Denied
	ttl := authzAllowTTL
	if !allowed {
		ttl = authzDenyTTL
	}
	r.access.Add(string(key), allowed, ttl)
	return allowed, review.Status.Reason, nil
}

// bearerToken returns the token of an "Authorization: Bearer <token>"
// header; ok is false when there is none or it is malformed.
func bearerToken(h string) (string, bool) {
	scheme, token, found := strings.Cut(strings.TrimSpace(h), " ")
	token = strings.TrimSpace(token)
	return token, found && strings.EqualFold(scheme, "Bearer") && token != ""
}

// NewAuthorizedHandler serves next to callers that r authenticates and
// allows to get MetricsPath. It answers 401 to a request without a bearer
// token or with one the API server does not accept, 403 to a caller not
// allowed, and 503 when the API server could not be asked: never the
// metrics unless allowed. Outcomes are counted on reg.
func NewAuthorizedHandler(r *Reviewer, reg prometheus.Registerer, next http.Handler) http.Handler {
	outcomes := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "kube_reclaim",
		Subsystem: "metrics",
		Name:      "requests_total",
		Help:      "Requests to the metrics server by outcome of authentication and authorization.",
	}, []string{"outcome"})
	reg.MustRegister(outcomes)
	for _, o := range []string{OutcomeAllowed, OutcomeNoToken, OutcomeInvalidToken, OutcomeDenied, OutcomeAuthnError, OutcomeAuthzError} {
		outcomes.WithLabelValues(o)
	}
	unauthorized := func(w http.ResponseWriter, outcome, msg string) {
		outcomes.WithLabelValues(outcome).Inc()
		w.Header().Set("WWW-Authenticate", `Bearer realm="kube-reclaim metrics"`)
		http.Error(w, "Unauthorized: "+msg, http.StatusUnauthorized)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		log := logrus.WithFields(logrus.Fields{"remote": req.RemoteAddr, "path": req.URL.Path})
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
		case err != nil:
			outcomes.WithLabelValues(OutcomeAuthnError).Inc()
			log.WithError(err).Warn("metrics request: the bearer token could not be reviewed")
			http.Error(w, "Service Unavailable: the bearer token could not be reviewed: "+err.Error(), http.StatusServiceUnavailable)
			return
		case !ok:
			unauthorized(w, OutcomeInvalidToken, "the API server did not accept the bearer token (TokenReview)")
			return
		}
		allowed, reason, err := r.Authorize(req.Context(), user)
		switch {
		case err != nil:
			outcomes.WithLabelValues(OutcomeAuthzError).Inc()
			log.WithError(err).WithField("user", user.Username).Warn("metrics request: access could not be reviewed")
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
