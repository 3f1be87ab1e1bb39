package replay

import (
	"context"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	"github.com/kube-reclaim/kube-reclaim/eviction"
	"github.com/kube-reclaim/kube-reclaim/internal/policyinput"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// evictor is a contender's eviction.Controller in dry-run on the replay's
// clock: its dry-run Events name the victims, which leave the replay as the
// Eviction API would remove them.
type evictor struct {
	ctrl *eviction.Controller
	rec  *victimRecorder
	// buf is reused for each observation's reclaimed pods.
	buf []eviction.PodUsage
}

func newEvictor(cfg Config, clk *testingclock.FakeClock, pods func(node string) []*policyinput.Pod) *evictor {
	opts := cfg.Eviction
	if opts.Mode != eviction.ModeOff {
		// Dry-run decides as on would and names its victims in Events.
		opts.Mode = eviction.ModeDryRun
	}
	e := &evictor{rec: &victimRecorder{}, ctrl: eviction.New(eviction.Config{Options: opts, Period: cfg.Period,
		MetricsStaleAfter: cfg.MetricsStaleAfter, Clock: clk, Pods: pods}, prometheus.NewRegistry())}
	e.ctrl.SetRecorder(e.rec)
	return e
}

// observe passes the node's observation on, with the replay's batch pods
// added as measured: the policy's view of the node (eviction.Measure) holds
// only the trace's pods. A batch pod uses all the memory it holds (the
// worst case for memory pressure) and its share of the CPU regular usage
// leaves (they run at the minimum CPU weight, so regular pods are served
// first), at most its grant.
func (e *evictor) observe(obs eviction.Observation, batch []*policyinput.Pod, regular, alloc reclaimable.Resources) {
	var granted int64
	for _, b := range batch {
		granted += b.Reclaimed.CPUMilli
	}
	left := min(max(alloc.CPUMilli-regular.CPUMilli, 0), granted)
	for _, b := range batch {
		used := reclaimable.Resources{MemoryBytes: b.Reclaimed.MemoryBytes}
		if granted > 0 {
			used.CPUMilli = b.Reclaimed.CPUMilli * left / granted
		}
		obs.Used = obs.Used.Add(used)
		obs.Reclaimed = append(obs.Reclaimed, eviction.PodUsage{UID: b.UID, Grant: b.Reclaimed, Used: used, Measured: true})
	}
	e.buf = obs.Reclaimed
	e.ctrl.Observe(obs)
}

func (e *evictor) act(ctx context.Context) []types.UID {
	e.rec.victims = e.rec.victims[:0]
	e.ctrl.Act(ctx)
	return e.rec.victims
}

// victimRecorder takes the controller's Events: a dry-run Event on a Pod
// names a pod the controller chose, which the replay then removes as the
// Eviction API would have.
type victimRecorder struct{ victims []types.UID }

func (r *victimRecorder) Event(obj runtime.Object, _, reason, _ string) {
	if ref, ok := obj.(*corev1.ObjectReference); ok && ref.Kind == "Pod" && reason == eviction.ReasonDryRun {
		r.victims = append(r.victims, ref.UID)
	}
}

func (r *victimRecorder) Eventf(obj runtime.Object, eventtype, reason, _ string, _ ...any) {
	r.Event(obj, eventtype, reason, "")
}

func (r *victimRecorder) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventtype, reason, _ string, _ ...any) {
	r.Event(obj, eventtype, reason, "")
}
