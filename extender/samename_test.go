package extender

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"

	"github.com/kube-reclaim/kube-reclaim/placement"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// The pod informer keys pods by namespace/name. After a relist, a pod
// deleted and recreated under the same name while the watch was down (a
// StatefulSet's pod) arrives as an update from the old pod to the new one,
// and the old pod's deletion never does: its room must be released then.
func TestPodUpdateToAnotherUIDReleasesTheOldPodsRoom(t *testing.T) {
	old := &podRecord{namespace: "ns", name: "web-0", uid: types.UID("uid-old"), nodeName: "a", req: req(500, gi)}
	for _, tc := range []struct {
		name string
		new  *podRecord
		// want is the used room of nodes a and b after the update.
		wantA, wantB reclaimable.Resources
	}{
		{name: "recreated under the same name, not bound yet: a is freed",
			new: &podRecord{namespace: "ns", name: "web-0", uid: types.UID("uid-new"), req: req(500, gi)}},
		{name: "recreated under the same name and bound elsewhere: only b is used",
			new:   &podRecord{namespace: "ns", name: "web-0", uid: types.UID("uid-new"), nodeName: "b", req: req(300, gi)},
			wantB: req(300, gi)},
		// Positive control: an update of the same pod keeps its room.
		{name: "the same pod updated: a stays used",
			new:   &podRecord{namespace: "ns", name: "web-0", uid: types.UID("uid-old"), nodeName: "a", req: req(500, gi), resourceVersion: "2"},
			wantA: req(500, gi)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := placement.NewCache(10*time.Minute, 30*time.Second, bindAPITimeout, nil, newMetrics(prometheus.NewRegistry()).cache)
			c.SetClock(func() time.Time { return t0 }, func(time.Time) bool { return true })
			h := podHandlers(c)
			h.OnAdd(old, false)
			if got := used(c, "a"); got != old.req {
				t.Fatalf("before the update: node a used %+v, want %+v", got, old.req)
			}
			h.OnUpdate(old, tc.new)
			if got := used(c, "a"); got != tc.wantA {
				t.Errorf("node a used %+v, want %+v", got, tc.wantA)
			}
			if got := used(c, "b"); got != tc.wantB {
				t.Errorf("node b used %+v, want %+v", got, tc.wantB)
			}
			// The new pod's own deletion leaves nothing behind.
			h.OnDelete(tc.new)
			if _, _, placed := c.Counts(); placed != 0 {
				t.Errorf("after the new pod's deletion %d pods are still placed, want 0", placed)
			}
		})
	}
}

func used(c *placement.Cache, node string) reclaimable.Resources {
	u, _ := c.Held(node)
	return u
}
