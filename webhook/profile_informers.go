package webhook

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-reclaim/kube-reclaim/internal/policyfile"
	"github.com/kube-reclaim/kube-reclaim/internal/serving"
	"github.com/kube-reclaim/kube-reclaim/policy"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// startProfiles starts the namespace and PriorityClass informers the
// profile rewriter reads on the request path (no API call per review), the
// policy file watcher (those in wg), and a readiness check that holds the replica out of
// the Service until the informers have synced: a review answered before
// would refuse every opted-in pod for an unknown namespace.
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

	// Only labels and names are read; drop the rest before it is cached.
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithTransform(func(obj any) (any, error) {
		if m, ok := obj.(metav1.Object); ok {
			m.SetManagedFields(nil)
			m.SetAnnotations(nil)
		}
		return obj, nil
	}))
	namespaces := factory.Core().V1().Namespaces()
	classes := factory.Scheduling().V1().PriorityClasses()
	nsLister, pcLister := namespaces.Lister(), classes.Lister()
	nsSynced, pcSynced := namespaces.Informer().HasSynced, classes.Informer().HasSynced
	factory.Start(ctx.Done())
	// Shutdown waits for the informers Start began, which end with ctx.
	wg.Go(func() { <-ctx.Done(); factory.Shutdown() })
	wg.Go(func() { file.Run(ctx) })
	health.AddReadyCheck("profile-informers", func() error {
		if !nsSynced() || !pcSynced() {
			return errors.New("namespace and PriorityClass informers not synced yet")
		}
		return nil
	})

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
