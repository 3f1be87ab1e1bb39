package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// The fake API pages lists like kube-apiserver: by limit and continue,
// except at resourceVersion "0", which comes whole.
func TestFakeAPIPagesLikeTheAPIServer(t *testing.T) {
	for _, tc := range []struct {
		query          string
		from, to       int
		whole          bool
		wantContinuing string
	}{
		{"", 0, 1234, true, ""},
		{"?resourceVersion=0&limit=500", 0, 1234, true, ""},
		{"?limit=500", 0, 500, false, "500"},
		{"?limit=500&continue=1000", 1000, 1234, false, ""},
		{"?resourceVersion=0&limit=500&continue=500", 500, 1000, false, "1000"},
	} {
		r := httptest.NewRequest(http.MethodGet, "/api/v1/pods"+tc.query, nil)
		from, to, whole := page(r, 1234)
		if from != tc.from || to != tc.to || whole != tc.whole || next(to, 1234) != tc.wantContinuing {
			t.Errorf("%q: [%d,%d) whole=%v continue %q, want [%d,%d) whole=%v continue %q",
				tc.query, from, to, whole, next(to, 1234), tc.from, tc.to, tc.whole, tc.wantContinuing)
		}
	}
}

// A node patch reaches node watchers and is answered in the encoding the
// client asked for, as kube-apiserver does: client-go decodes both.
func TestFakeAPIPatchReachesWatchersInTheAskedEncoding(t *testing.T) {
	f, err := newFakeAPI(3, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := f.start(ctx); err != nil {
		t.Fatal(err)
	}
	defer f.stop()
	for _, contentType := range []string{"application/json", "application/vnd.kubernetes.protobuf"} {
		t.Run(contentType, func(t *testing.T) {
			var answered sync.Map // request method -> response Content-Type
			client := kubernetes.NewForConfigOrDie(&rest.Config{Host: f.url, ContentConfig: rest.ContentConfig{ContentType: contentType},
				WrapTransport: func(rt http.RoundTripper) http.RoundTripper {
					return roundTripFunc(func(r *http.Request) (*http.Response, error) {
						res, err := rt.RoundTrip(r)
						if err == nil {
							answered.Store(r.Method, res.Header.Get("Content-Type"))
						}
						return res, err
					})
				}})
			nodes := client.CoreV1().Nodes()
			w, err := nodes.Watch(ctx, metav1.ListOptions{ResourceVersion: "1000"})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			name := f.order[1]
			// The watcher is registered once its stream is open: patch until
			// an event arrives, each patch with a new value.
			tick := time.NewTicker(50 * time.Millisecond)
			defer tick.Stop()
			timeout := time.After(10 * time.Second)
			for i := 0; ; i++ {
				want := fmt.Sprintf("%s-%d", contentType, i)
				patch := fmt.Sprintf(`{"metadata":{"annotations":{"bench/test":%q}}}`, want)
				got, err := nodes.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}, "status")
				if err != nil {
					t.Fatal(err)
				}
				if got.Annotations["bench/test"] != want {
					t.Fatalf("patch answered annotation %q, want %q", got.Annotations["bench/test"], want)
				}
				select {
				case ev := <-w.ResultChan():
					n, ok := ev.Object.(*corev1.Node)
					if ev.Type != watch.Modified || !ok || n.Name != name || !strings.HasPrefix(n.Annotations["bench/test"], contentType+"-") {
						t.Fatalf("watch event %s %#v", ev.Type, ev.Object)
					}
					for _, method := range []string{http.MethodGet, http.MethodPatch} {
						if ct, _ := answered.Load(method); ct == nil || !strings.HasPrefix(ct.(string), contentType) {
							t.Errorf("%s answered in %v, want %s", method, ct, contentType)
						}
					}
					return
				case <-timeout:
					t.Fatal("no watch event in 10 s")
				case <-tick.C:
				}
			}
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
