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
	"github.com/kube-reclaim/kube-reclaim/policy"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// evictor is the eviction controller of one contender, seen from the
// replay: every node is observed once per step, then act returns the pods
// it chose, which leave the replay as the Eviction API would remove them.
type evictor interface {
	// observe takes one node's step: its allocatable, the policy's result,
	// what batch pods hold and what the node measures of all its pods (nil
	// when its samples are stale).
	observe(node string, alloc reclaimable.Resources, res policy.Result, held reclaimable.Resources, use *reclaimable.Resources)
	act(ctx context.Context) []types.UID
}

// controllerEvictor runs the publisher's eviction.Controller in dry-run on
// the replay's clock; its dry-run Events name the victims.
type controllerEvictor struct {
	ctrl *eviction.Controller
	rec  *victimRecorder
}

func newEvictor(cfg Config, clk *testingclock.FakeClock, pods func(node string) []*policyinput.Pod) evictor {
	opts := cfg.Eviction
	if opts.Mode != eviction.ModeOff {
		// Dry-run decides as on would and names its victims in Events.
		opts.Mode = eviction.ModeDryRun
	}
	e := &controllerEvictor{rec: &victimRecorder{},
		ctrl: eviction.New(eviction.Config{Options: opts, Period: cfg.Period, Clock: clk, Pods: pods}, prometheus.NewRegistry())}
	e.ctrl.SetRecorder(e.rec)
	return e
}

func (e *controllerEvictor) observe(node string, _ reclaimable.Resources, res policy.Result, held reclaimable.Resources, _ *reclaimable.Resources) {
	e.ctrl.Observe(node, res, held)
}

func (e *controllerEvictor) act(ctx context.Context) []types.UID {
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
