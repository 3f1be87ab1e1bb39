package watchhealth_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-reclaim/kube-reclaim/internal/watchhealth"
	"github.com/kube-reclaim/kube-reclaim/test/framework"
)

// api is a fake API server whose ConfigMap list and watch calls can be
// made to fail, and whose open watches can be cut.
type api struct {
	client  *fake.Clientset
	broken  atomic.Bool
	mu      sync.Mutex
	watches []*watch.FakeWatcher
	calls   atomic.Int64
}

func newAPI() *api {
	a := &api{client: fake.NewClientset()}
	refused := errors.New("dial tcp 10.96.0.1:443: connect: connection refused")
	a.client.PrependReactor("list", "configmaps", func(clienttesting.Action) (bool, runtime.Object, error) {
		a.calls.Add(1)
		if a.broken.Load() {
			return true, nil, refused
		}
		return true, &corev1.ConfigMapList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}, nil
	})
	a.client.PrependWatchReactor("configmaps", func(clienttesting.Action) (bool, watch.Interface, error) {
		a.calls.Add(1)
		if a.broken.Load() {
			return true, nil, refused
		}
		w := watch.NewFake()
		a.mu.Lock()
		defer a.mu.Unlock()
		a.watches = append(a.watches, w)
		return true, w, nil
	})
	return a
}

// cut makes every call fail from now on and closes the open watches, as an
// API server that went away does.
func (a *api) cut() {
	a.broken.Store(true)
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, w := range a.watches {
		w.Stop()
	}
	a.watches = nil
}

// start runs an informer of ConfigMaps through w until the test ends, or
// until the returned cancel.
func start(t *testing.T, a *api, w *watchhealth.Watch) (cancel func(), done <-chan struct{}) {
	t.Helper()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return a.client.CoreV1().ConfigMaps("").List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return a.client.CoreV1().ConfigMaps("").Watch(ctx, o)
		},
	}
	inf := cache.NewSharedIndexInformer(w.ListerWatcher(lw), &corev1.ConfigMap{}, 0, cache.Indexers{})
	ctx, stop := context.WithCancel(context.Background())
	finished := make(chan struct{})
	go func() { defer close(finished); w.Run(ctx, inf) }()
	t.Cleanup(func() { stop(); <-finished })
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer never synced")
	}
	return stop, finished
}

// A lost API server fails the check only once no call has succeeded for the
// stall time, at every look before that it passes; and it passes again once
// a call succeeds.
func TestCheckFailsOnlyAfterTheCallsFailedForTheStall(t *testing.T) {
	const stall = time.Second
	a := newAPI()
	w := watchhealth.New("configmaps", stall)
	start(t, a, w)
	if err := w.Check(); err != nil {
		t.Fatalf("Check of a synced informer = %v", err)
	}
	before := a.calls.Load()
	cut := time.Now()
	a.cut()
	var failedAt time.Time
	framework.ExpectAbsence(t, framework.Absence{Window: stall, Every: 100 * time.Millisecond, ControlWithin: stall + 10*time.Second,
		Look: func(time.Duration) ([]string, bool) {
			err := w.Check()
			now := time.Now()
			if err == nil {
				return nil, false
			}
			if failedAt.IsZero() {
				failedAt = now
			}
			// The first failing call came after the cut: a failure seen
			// before cut + stall is early.
			if now.Sub(cut) < stall {
				return []string{fmt.Sprintf("failing %s after the cut, before the stall (%s): %v", now.Sub(cut), stall, err)}, true
			}
			return nil, true
		}})
	if a.calls.Load() == before {
		t.Fatal("the informer made no call after the cut: the check failed for another reason")
	}
	if err := w.Check(); err == nil || !strings.Contains(err.Error(), "configmaps: no list or watch succeeded") || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("Check = %v, want the informer, the stall and the last error named", err)
	}
	t.Logf("failing %s after the cut (stall %s)", failedAt.Sub(cut).Round(time.Millisecond), stall)

	// The reflector's backoff doubles from 0.8 s (with as much jitter): a
	// few seconds after a few failures, a minute at most.
	a.broken.Store(false)
	if _, ok := framework.Poll(75*time.Second, 20*time.Millisecond, func() bool { return w.Check() == nil }); !ok {
		t.Errorf("Check = %v 75 s after the API server came back", w.Check())
	}
}

func TestCheckFailsOnceTheInformerStopped(t *testing.T) {
	w := watchhealth.New("configmaps", time.Hour)
	stop, done := start(t, newAPI(), w)
	if err := w.Check(); err != nil {
		t.Fatalf("Check of a running informer = %v", err)
	}
	stop()
	<-done
	if err := w.Check(); err == nil || !strings.Contains(err.Error(), "configmaps: informer stopped") {
		t.Errorf("Check of a stopped informer = %v, want it named stopped", err)
	}
}

func TestChecksJoinsTheFailuresAndSkipsNil(t *testing.T) {
	running := watchhealth.New("nodes", time.Hour)
	start(t, newAPI(), running)
	stopped := watchhealth.New("pods", time.Hour)
	stop, done := start(t, newAPI(), stopped)
	if err := watchhealth.Checks(running, nil, stopped)(); err != nil {
		t.Fatalf("both running: %v", err)
	}
	stop()
	<-done
	err := watchhealth.Checks(running, nil, stopped)()
	if err == nil || !strings.Contains(err.Error(), "pods: informer stopped") || strings.Contains(err.Error(), "nodes") {
		t.Errorf("Checks = %v, want the stopped informer only", err)
	}
}
