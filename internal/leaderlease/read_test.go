package leaderlease_test

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/utils/ptr"

	"github.com/kube-reclaim/kube-reclaim/internal/leaderlease"
	"github.com/kube-reclaim/kube-reclaim/internal/leaderlease/leasetest"
)

var t0 = time.Date(2026, 11, 27, 4, 0, 0, 0, time.UTC)

func held(holder string, renewed time.Time, seconds int32) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: leaderlease.DefaultNamespace, Name: leaderlease.DefaultName},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder), LeaseDurationSeconds: ptr.To(seconds),
			RenewTime: ptr.To(metav1.NewMicroTime(renewed))},
	}
}

// released is the Lease as client-go's leader election leaves it when its
// holder stops (ReleaseOnCancel): no holder, a one-second duration.
func released(at time.Time) *coordinationv1.Lease {
	l := held("", at, 1)
	l.Spec.HolderIdentity = nil
	return l
}

// trackerAfter is the deadline a Tracker holds after watching versions, by
// the rule it applies to each event.
func trackerAfter(versions []*coordinationv1.Lease) time.Time {
	var d time.Time
	for _, v := range versions {
		d = leaderlease.Next(d, v)
	}
	return d
}

func TestReadJudgesALeaseAsATrackerThatWatchedItDoes(t *testing.T) {
	renewal := held("publisher-0", t0, 15) // deadline t0+30s
	tests := []struct {
		name            string
		versions        []*coordinationv1.Lease
		compactedBefore uint64
		at              time.Duration // after t0
		want            bool
	}{
		{"held, within two lease durations", []*coordinationv1.Lease{renewal}, 0, 29 * time.Second, true},
		{"held, after two lease durations", []*coordinationv1.Lease{renewal}, 0, 30 * time.Second, false},
		{"released after a renewal keeps the renewal's deadline", []*coordinationv1.Lease{renewal, released(t0.Add(2 * time.Second))}, 0, 10 * time.Second, true},
		{"released after a renewal, past the renewal's deadline", []*coordinationv1.Lease{renewal, released(t0.Add(2 * time.Second))}, 0, 30 * time.Second, false},
		{"released twice keeps the renewal's deadline", []*coordinationv1.Lease{renewal, released(t0.Add(2 * time.Second)), released(t0.Add(3 * time.Second))}, 0, 10 * time.Second, true},
		{"released, then taken by a standby", []*coordinationv1.Lease{renewal, released(t0.Add(2 * time.Second)), held("publisher-1", t0.Add(4*time.Second), 15)}, 0, 31 * time.Second, true},
		{"released without any renewal before", []*coordinationv1.Lease{released(t0)}, 0, time.Second, false},
		{"a renewal without duration, then released", []*coordinationv1.Lease{{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("x"), RenewTime: ptr.To(metav1.NewMicroTime(t0))}}, released(t0.Add(time.Second))}, 0, 2 * time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			client := fake.NewClientset()
			for _, v := range tt.versions {
				v.Namespace, v.Name = leaderlease.DefaultNamespace, leaderlease.DefaultName
			}
			leasetest.History(client, tt.compactedBefore, tt.versions...)
			r, err := leaderlease.Read(context.Background(), client, leaderlease.DefaultNamespace, leaderlease.DefaultName)
			if err != nil {
				t.Fatal(err)
			}
			now := t0.Add(tt.at)
			tracker := trackerAfter(tt.versions)
			if got := now.Before(r.Deadline); got != tt.want || now.Before(tracker) != tt.want {
				t.Errorf("alive at t0+%s: Read says %v (deadline %s), a Tracker %v (deadline %s); want %v", tt.at, got, r.Deadline, now.Before(tracker), tracker, tt.want)
			}
		})
	}
}

// A Tracker started after the release has no renewal to keep, and neither
// has Read once etcd compacted the versions before the release: both count
// the Lease as dead rather than guess.
func TestAReleasedLeaseWithoutItsHistoryIsDead(t *testing.T) {
	versions := []*coordinationv1.Lease{held("publisher-0", t0, 15), released(t0.Add(2 * time.Second))}
	client := fake.NewClientset()
	leasetest.History(client, 25, versions...) // etcd compacted past the release (20)
	r, err := leaderlease.Read(context.Background(), client, leaderlease.DefaultNamespace, leaderlease.DefaultName)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Deadline.IsZero() || r.History == nil || r.Renewal != nil {
		t.Errorf("Read = deadline %s, history error %v, renewal %v; want dead, with the history error", r.Deadline, r.History, r.Renewal)
	}
	if d := trackerAfter(versions[1:]); !d.IsZero() {
		t.Errorf("a Tracker that saw only the release holds %s, want zero", d)
	}
	// Positive control: with the history, the same Lease is alive.
	client = fake.NewClientset()
	leasetest.History(client, 0, versions...)
	if r, err := leaderlease.Read(context.Background(), client, leaderlease.DefaultNamespace, leaderlease.DefaultName); err != nil || !t0.Add(10*time.Second).Before(r.Deadline) {
		t.Errorf("with history: deadline %s, err %v; want alive at t0+10s", r.Deadline, err)
	}
}
