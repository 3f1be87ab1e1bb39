// Package servingtest stands in for the API server's TokenReview and
// SubjectAccessReview endpoints, for unit tests of the authenticated metrics
// server of a role run without a cluster.
package servingtest

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// Tokens the ReviewAPI knows; any other token is not authenticated.
const (
	// AllowedToken is the token of AllowedUser, who may get /metrics.
	AllowedToken = "servingtest-allowed-token"
	AllowedUser  = "scraper"
	// DeniedToken is the token of DeniedUser, who may not.
	DeniedToken = "servingtest-denied-token"
	DeniedUser  = "someone"
)

// ReviewAPI answers TokenReviews and SubjectAccessReviews and counts them.
type ReviewAPI struct {
	// Kubeconfig is a kubeconfig file naming the ReviewAPI.
	Kubeconfig                  string
	TokenReviews, AccessReviews atomic.Int64
	// InFlight is how many TokenReviews are being answered.
	InFlight atomic.Int64
	hold     atomic.Pointer[chan struct{}]
	server   *httptest.Server
}

// Hold makes every TokenReview wait, from now until release is called, as
// an API server slow to answer.
func (a *ReviewAPI) Hold() (release func()) {
	ch := make(chan struct{})
	a.hold.Store(&ch)
	var once sync.Once
	return func() { once.Do(func() { a.hold.Store(nil); close(ch) }) }
}

// NewReviewAPI starts a ReviewAPI that stops when the test ends.
func NewReviewAPI(t testing.TB) *ReviewAPI {
	t.Helper()
	a := &ReviewAPI{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /apis/authentication.k8s.io/v1/tokenreviews", func(w http.ResponseWriter, r *http.Request) {
		a.TokenReviews.Add(1)
		a.InFlight.Add(1)
		defer a.InFlight.Add(-1)
		if ch := a.hold.Load(); ch != nil {
			select {
			case <-*ch:
			case <-r.Context().Done():
			}
		}
		var review authenticationv1.TokenReview
		if !decode(w, r, &review) {
			return
		}
		switch review.Spec.Token {
		case AllowedToken:
			review.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: AllowedUser}}
		case DeniedToken:
			review.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: DeniedUser}}
		default:
			review.Status = authenticationv1.TokenReviewStatus{Error: "unknown token"}
		}
		encode(w, &review)
	})
	mux.HandleFunc("POST /apis/authorization.k8s.io/v1/subjectaccessreviews", func(w http.ResponseWriter, r *http.Request) {
		a.AccessReviews.Add(1)
		var review authorizationv1.SubjectAccessReview
		if !decode(w, r, &review) {
			return
		}
		na := review.Spec.NonResourceAttributes
		review.Status.Allowed = review.Spec.User == AllowedUser && na != nil && na.Path == "/metrics" && na.Verb == "get"
		if !review.Status.Allowed {
			review.Status.Reason = "servingtest allows only " + AllowedUser
		}
		encode(w, &review)
	})
	a.server = httptest.NewServer(mux)
	t.Cleanup(a.server.Close)

	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["review"] = &clientcmdapi.Cluster{Server: a.server.URL}
	cfg.AuthInfos["review"] = &clientcmdapi.AuthInfo{Token: "servingtest-role-token"}
	cfg.Contexts["review"] = &clientcmdapi.Context{Cluster: "review", AuthInfo: "review"}
	cfg.CurrentContext = "review"
	a.Kubeconfig = filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, a.Kubeconfig); err != nil {
		t.Fatal(err)
	}
	return a
}

// Close stops answering, as an API server that is gone.
func (a *ReviewAPI) Close() { a.server.Close() }

// decode reads a review in JSON or protobuf, as client-go may send either.
func decode(w http.ResponseWriter, r *http.Request, into runtime.Object) bool {
	body, err := io.ReadAll(r.Body)
	if err == nil {
		_, _, err = scheme.Codecs.UniversalDeserializer().Decode(body, nil, into)
	}
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return false
	}
	return true
}

func encode(w http.ResponseWriter, obj runtime.Object) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_ = json.NewEncoder(w).Encode(obj)
}

// Get GETs url over HTTPS without verifying the server, with token as a
// bearer token when not empty, and returns the status code and body.
func Get(t testing.TB, url, token string) (int, string) {
	t.Helper()
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the self-signed metrics certificate
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	res, err := client.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(body)
}

// FreeAddr returns a loopback address whose port was free a moment ago.
func FreeAddr(t testing.TB) string {
	t.Helper()
	ln, err := (&net.ListenConfig{}).Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}
