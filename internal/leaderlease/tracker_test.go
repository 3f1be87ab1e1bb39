package leaderlease

import (
	"context"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/kube-reclaim/kube-reclaim/internal/leaderlease/leasetest"
)

const ns, name = "kube-reclaim", "kube-reclaim-publisher"

var now = time.Date(2026, 11, 27, 4, 0, 0, 0, time.UTC)

func lease(renewedAgo time.Duration, duration int32) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("publisher-0"), LeaseDurationSeconds: ptr.To(duration),
			RenewTime: ptr.To(metav1.NewMicroTime(now.Add(-renewedAgo)))},
	}
}

// started runs a tracker over a fake API holding objs and waits for its
// first list.
func started(t *testing.T, objs ...*coordinationv1.Lease) (*Tracker, *fake.Clientset) {
	t.Helper()
	client := fake.NewClientset()
	for _, l := range objs {
		if _, err := client.CoordinationV1().Leases(l.Namespace).Create(context.Background(), l, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	tr := New(client, ns, name)
	go tr.Run(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), tr.HasSynced) {
		t.Fatal("never synced")
	}
	return tr, client
}

// eventually polls Alive until it equals want, for changes that arrive
// through the watch.
func eventually(t *testing.T, tr *Tracker, want bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for tr.Alive(now) != want {
		if time.Now().After(deadline) {
			t.Fatalf("Alive = %v for 10s, want %v", !want, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestLeaseCountsAsAliveOnlyWhileRenewed(t *testing.T) {
	noRenew := lease(0, 15)
	noRenew.Spec.RenewTime = nil
	noDuration := lease(0, 15)
	noDuration.Spec.LeaseDurationSeconds = nil
	otherNamespace := lease(0, 15)
	otherNamespace.Namespace = "elsewhere"
	tests := []struct {
		name  string
		lease *coordinationv1.Lease
		want  bool
	}{
		{"renewed within two lease durations", lease(29*time.Second, 15), true},
		{"not renewed for two lease durations", lease(30*time.Second, 15), false},
		{"no Lease at all", nil, false},
		{"only a Lease of the same name in another namespace", otherNamespace, false},
		{"a Lease without renew time", noRenew, false},
		{"a Lease without duration", noDuration, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var objs []*coordinationv1.Lease
			if tt.lease != nil {
				objs = append(objs, tt.lease)
			}
			tr, _ := started(t, objs...)
			if got := tr.Alive(now); got != tt.want {
				t.Errorf("Alive = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDeletedLeaseIsNotAlive(t *testing.T) {
	tr, client := started(t, lease(time.Second, 15))
	if !tr.Alive(now) {
		t.Fatal("a freshly renewed Lease is not alive")
	}
	if err := client.CoordinationV1().Leases(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, tr, false)
	// The same watch brings a recreated Lease back to life: the deletion
	// above was seen through it, not lost.
	if _, err := client.CoordinationV1().Leases(ns).Create(context.Background(), lease(time.Second, 15), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, tr, true)
}

func TestLeaseBlankedByAnUpdateIsNotAlive(t *testing.T) {
	tr, client := started(t, lease(time.Second, 15))
	if !tr.Alive(now) {
		t.Fatal("a freshly renewed Lease is not alive")
	}
	blank := lease(time.Second, 15)
	blank.Spec.RenewTime = nil
	if _, err := client.CoordinationV1().Leases(ns).Update(context.Background(), blank, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, tr, false)
}

// released is the Lease as client-go leaves it when its holder stops
// (ReleaseOnCancel): no holder, a one-second duration, renewed at the
// release.
func released(at time.Duration) *coordinationv1.Lease {
	l := lease(-at, 1)
	l.Spec.HolderIdentity = ptr.To("")
	return l
}

func TestReleasedLeaseKeepsTheDeadlineOfTheLastRenewal(t *testing.T) {
	tr, client := started(t, lease(time.Second, 15))
	if _, err := client.CoordinationV1().Leases(ns).Update(context.Background(), released(0), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The update arrives through the watch: wait for it before judging.
	deadline := time.Now().Add(10 * time.Second)
	for {
		l, ok, err := tr.informer.GetStore().GetByKey(ns + "/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if ok && *l.(*coordinationv1.Lease).Spec.LeaseDurationSeconds == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the release never reached the tracker")
		}
		time.Sleep(10 * time.Millisecond)
	}
	tests := []struct {
		name string
		at   time.Duration // from now, the release
		want bool
	}{
		// Taken from the release, the deadline would be two seconds on:
		// every reader would count the publisher dead until a standby
		// takes the Lease.
		{"between the release and a takeover", 5 * time.Second, true},
		{"up to two lease durations after the last renewal", 28 * time.Second, true},
		{"not beyond: a release never extends the deadline", 29 * time.Second, false},
	}
	// kubectl reclaim reads the Lease once, with the version before the
	// release (leaderlease.Read): it must say what the Tracker says.
	history := fake.NewClientset()
	leasetest.History(history, 0, lease(time.Second, 15), released(0))
	read, err := Read(context.Background(), history, ns, name)
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tr.Alive(now.Add(tt.at)); got != tt.want {
				t.Errorf("Alive %s after the release = %v, want %v", tt.at, got, tt.want)
			}
			if got := now.Add(tt.at).Before(read.Deadline); got != tt.want {
				t.Errorf("Read: alive %s after the release = %v, want %v as the Tracker", tt.at, got, tt.want)
			}
		})
	}
	// A standby that takes the Lease renews it: alive from its renewal on.
	if _, err := client.CoordinationV1().Leases(ns).Update(context.Background(), lease(-40*time.Second, 15), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for !tr.Alive(now.Add(60 * time.Second)) {
		if time.Now().After(deadline) {
			t.Fatal("the takeover never reached the tracker")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestLeaseReleasedBeforeTheFirstListIsNotAlive(t *testing.T) {
	// No renewal seen, so no deadline to keep: nobody leads.
	tr, _ := started(t, released(0))
	if tr.Alive(now) {
		t.Error("a Lease released before the tracker started counts as alive")
	}
}

func TestUntrackedLeaseIsAlive(t *testing.T) {
	// No --publisher-lease-name: the configuration tracks nothing, so only
	// the annotation's write time bounds staleness.
	s := DefaultStaleness()
	s.PublisherLeaseName = ""
	tr := s.NewTracker(fake.NewClientset())
	if tr != nil {
		t.Fatalf("NewTracker without a lease name = %v, want nil", tr)
	}
	if !tr.HasSynced() || !tr.Alive(now) {
		t.Errorf("nil tracker: HasSynced %v, Alive %v; want both true", tr.HasSynced(), tr.Alive(now))
	}
	tr.Run(context.Background()) // returns at once
}

func TestNotAliveBeforeTheFirstList(t *testing.T) {
	tr := New(fake.NewClientset(lease(time.Second, 15)), ns, name)
	if tr.HasSynced() || tr.Alive(now) {
		t.Errorf("before Run: HasSynced %v, Alive %v; want both false", tr.HasSynced(), tr.Alive(now))
	}
}

// The tracker's informer is part of the liveness of the roles that read the
// Lease: once it stops, its Check fails, naming the Lease.
func TestTrackerCheckFailsOnceItsInformerStopped(t *testing.T) {
	if err := (*Tracker)(nil).Check(); err != nil {
		t.Errorf("nil tracker: %v", err)
	}
	tr := New(fake.NewClientset(lease(0, 15)), ns, name)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); tr.Run(ctx) }()
	if !cache.WaitForCacheSync(ctx.Done(), tr.HasSynced) {
		t.Fatal("never synced")
	}
	if err := tr.Check(); err != nil {
		t.Errorf("running tracker: %v", err)
	}
	cancel()
	<-done
	if err := tr.Check(); err == nil || !strings.Contains(err.Error(), "publisher lease "+ns+"/"+name+": informer stopped") {
		t.Errorf("stopped tracker: %v, want the Lease named and stopped", err)
	}
}
