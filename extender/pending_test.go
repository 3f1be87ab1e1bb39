package extender

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-reclaim/kube-reclaim/test/metrictest"
)

// The Pending reclaimed pods are counted by age, and the oldest one's age
// is exported: pods bound, finished or asking no reclaimed resource are not
// counted, and a pod leaves the count once bound.
func TestPendingReclaimedPodsAreCountedByAgeUntilBound(t *testing.T) {
	created := func(p *corev1.Pod, ago time.Duration) *corev1.Pod {
		p.CreationTimestamp = metav1.NewTime(time.Now().Add(-ago))
		return p
	}
	f := newFixture(t, fixtureOpts{},
		created(pod("fresh", "", 1000, gi), time.Minute),
		created(pod("waiting", "", 1000, gi), 10*time.Minute),
		created(pod("old", "", 1000, gi), time.Hour),
		created(pod("bound", "n1", 1000, gi), 2*time.Hour),
		created(withPhase(pod("failed", "", 1000, gi), corev1.PodFailed), 3*time.Hour),
		created(plainPod("plain"), 4*time.Hour),
	)
	pending := func() map[string]float64 {
		got := map[string]float64{}
		for _, age := range []string{"under-5m", "5m-30m", "over-30m"} {
			got[age] = metrictest.Gathered(f.t, f.reg, "kube_reclaim_extender_pending_reclaimed_pods", map[string]string{"age": age})
		}
		return got
	}
	oldest := func() float64 {
		return metrictest.Gathered(f.t, f.reg, "kube_reclaim_extender_oldest_pending_reclaimed_pod_age_seconds", nil)
	}

	if got := pending(); got["under-5m"] != 1 || got["5m-30m"] != 1 || got["over-30m"] != 1 {
		t.Errorf("pending by age %v, want one in each", got)
	}
	if got := oldest(); got < 3600 || got > 3660 {
		t.Errorf("oldest pending age %vs, want about an hour", got)
	}

	old, err := f.client.CoreV1().Pods("batch").Get(context.Background(), "old", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	old.Spec.NodeName = "n1"
	if _, err := f.client.CoreV1().Pods("batch").Update(context.Background(), old, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	f.eventually("the bound pod leaving the count", func() bool { return pending()["over-30m"] == 0 })
	if got := pending(); got["under-5m"] != 1 || got["5m-30m"] != 1 {
		t.Errorf("pending by age %v after binding the oldest, want the two others", got)
	}
	if got := oldest(); got < 600 || got > 660 {
		t.Errorf("oldest pending age %vs after binding the oldest, want about 10 minutes", got)
	}
}
