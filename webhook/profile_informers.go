package webhook

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	schedulinglisters "k8s.io/client-go/listers/scheduling/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/kube-reclaim/kube-reclaim/internal/policyfile"
	"github.com/kube-reclaim/kube-reclaim/internal/serving"
	"github.com/kube-reclaim/kube-reclaim/internal/watchhealth"
	"github.com/kube-reclaim/kube-reclaim/policy"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// startProfiles starts the namespace and PriorityClass informers the
// profile rewriter reads on the request path (no API call per review), the
// policy file watcher (those in wg), a readiness check that holds the replica out of
// the Service until the informers have synced: a review answered before
// would refuse every opted-in pod for an unknown namespace, and a liveness
// check that fails once they stopped or cannot list and watch (watchhealth).
func startProfiles(ctx context.Context, wg *sync.WaitGroup, client kubernetes.Interface, names reclaimable.Names, file *policyfile.File,
	reg prometheus.Registerer, health *serving.Health) *ProfileRewriter {
	reloads := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "kube_reclaim", Subsystem: "webhook",
		Name: "config_reloads_total", Help: "Policy file reloads by result (success, error)."}, []string{"result"})
	reg.MustRegister(reloads)
	// Both series exist from the start at 0, so that an increase over them
	// (the reload alert of deploy/components/monitoring) sees the first.
	for _, result := range []string{"success", "error"} {
		reloads.WithLabelValues(result)
	}
	file.OnReload = func(_ *policy.Config, err error) {
		if err != nil {
			reloads.WithLabelValues("error").Inc()
			return
		}
		reloads.WithLabelValues("success").Inc()
	}

	nsWatch := watchhealth.New("namespaces", watchhealth.DefaultStall)
	namespaces := cache.NewSharedIndexInformer(nsWatch.ListerWatcher(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.CoreV1().Namespaces().List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return client.CoreV1().Namespaces().Watch(ctx, o)
		},
	}), &corev1.Namespace{}, 0, cache.Indexers{})
	pcWatch := watchhealth.New("priorityclasses", watchhealth.DefaultStall)
	classes := cache.NewSharedIndexInformer(pcWatch.ListerWatcher(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			return client.SchedulingV1().PriorityClasses().List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return client.SchedulingV1().PriorityClasses().Watch(ctx, o)
		},
	}), &schedulingv1.PriorityClass{}, 0, cache.Indexers{})
	for _, inf := range []cache.SharedIndexInformer{namespaces, classes} {
		// Only labels and names are read; drop the rest before it is cached.
		_ = inf.SetTransform(func(obj any) (any, error) {
			if m, ok := obj.(metav1.Object); ok {
				m.SetManagedFields(nil)
				m.SetAnnotations(nil)
			}
			return obj, nil
		})
	}
	nsLister := corelisters.NewNamespaceLister(namespaces.GetIndexer())
	pcLister := schedulinglisters.NewPriorityClassLister(classes.GetIndexer())
	wg.Go(func() { nsWatch.Run(ctx, namespaces) })
	wg.Go(func() { pcWatch.Run(ctx, classes) })
	wg.Go(func() { file.Run(ctx) })
	health.AddReadyCheck("profile-informers", func() error {
		if !namespaces.HasSynced() || !classes.HasSynced() {
			return errors.New("namespace and PriorityClass informers not synced yet")
		}
		return nil
	})
	health.AddLiveCheck("profile-informers", watchhealth.Checks(nsWatch, pcWatch))

	return NewProfileRewriter(names, file.Config,
		func(name string) (map[string]string, error) {
			ns, err := nsLister.Get(name)
			if err != nil {
				return nil, err
			}
			return ns.Labels, nil
		},
		func(name string) (*schedulingv1.PriorityClass, error) {
			pc, err := pcLister.Get(name)
			if err != nil {
				return nil, fmt.Errorf("no such PriorityClass (%w)", err)
			}
			return pc, nil
		}, reg)
}
