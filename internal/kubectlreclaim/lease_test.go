package kubectlreclaim

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/kube-reclaim/kube-reclaim/internal/leaderlease"
)

func publisherLease(namespace, name string, renewedAgo time.Duration) *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("publisher-1"), LeaseDurationSeconds: ptr.To[int32](15),
			RenewTime: ptr.To(metav1.NewMicroTime(now.Add(-renewedAgo)))},
	}
}

func TestNodesCountAsZeroWhenThePublisherLeaseExpired(t *testing.T) {
	tests := []struct {
		name       string
		lease      *coordinationv1.Lease
		args       []string
		wantStatus string
	}{
		{"renewed within two lease durations", publisherLease("kube-reclaim", "kube-reclaim-publisher", 29*time.Second), nil, "Fresh"},
		{"not renewed for two lease durations", publisherLease("kube-reclaim", "kube-reclaim-publisher", 31*time.Second), nil, "Stale: publisher-lease-expired"},
		{"another lease name", publisherLease("ops", "pub", time.Hour),
			[]string{"--publisher-lease-namespace", "ops", "--publisher-lease-name", "pub"}, "Stale: publisher-lease-expired"},
		{"lease not checked", publisherLease("kube-reclaim", "kube-reclaim-publisher", time.Hour), []string{"--publisher-lease-name="}, "Fresh"},
		{"no lease at all", nil, nil, "Stale: publisher-lease-expired"},
		{"no lease, none checked", nil, []string{"--publisher-lease-name="}, "Fresh"},
		{"a lease without renew time", &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-reclaim", Name: "kube-reclaim-publisher"}},
			nil, "Stale: publisher-lease-expired"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := fourNodes()
			w.objects = w.objects[:1] // node-a, fresh by its write time
			w.noLease = true
			if tt.lease != nil {
				w.objects = append(w.objects, tt.lease)
			}
			out, _, err := run(t, w, append([]string{"nodes"}, tt.args...)...)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "   "+tt.wantStatus+"   ") {
				t.Errorf("want status %q:\n%s", tt.wantStatus, out)
			}
		})
	}
}

func TestExplainSaysThePublisherIsNotLeading(t *testing.T) {
	w := fourNodes()
	w.objects = append(w.objects[:1], publisherLease("kube-reclaim", "kube-reclaim-publisher", 2*time.Minute))
	out, _, err := run(t, w, "explain", "node-a")
	if err != nil {
		t.Fatal(err)
	}
	want := "In effect:     cpu 0, memory 0 (stale)\n\n" +
		"Status: Stale (publisher-lease-expired): the publisher's leader Lease kube-reclaim/kube-reclaim-publisher was not renewed " +
		"for two lease durations (renewed 2m ago by \"publisher-1\", lease duration 15s). No publisher is leading: check the publisher's " +
		"pods and logs. The extender offers no room on any node, and the webhook writes only what reclaimed pods held, until a publisher renews the Lease.\n"
	if !strings.Contains(out, want) {
		t.Errorf("explain lacks %q:\n%s", want, out)
	}
}

func TestUnreadableLeaseWarnsAndDoesNotCount(t *testing.T) {
	w := fourNodes()
	w.objects = w.objects[:1]
	w.leaseErr = apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "kube-reclaim-publisher", nil)
	out, errOut, err := run(t, w, "nodes", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(errOut, "Warning: reading the publisher Lease kube-reclaim/kube-reclaim-publisher: leases.coordination.k8s.io \"kube-reclaim-publisher\" is forbidden") ||
		!strings.HasSuffix(errOut, "; not taken into account.\n") {
		t.Errorf("stderr %q", errOut)
	}
	var list NodeList
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	if l := list.PublisherLease; l == nil || !l.Alive || !strings.HasPrefix(l.Detail, "not taken into account: ") {
		t.Errorf("lease %+v", l)
	}
	if !list.Items[0].Fresh {
		t.Errorf("node-a not fresh: %+v", list.Items[0])
	}
}

func TestExplainSaysAMissingLeaseCountsAsExpired(t *testing.T) {
	w := fourNodes()
	w.objects, w.noLease = w.objects[:1], true
	out, _, err := run(t, w, "explain", "node-a")
	if err != nil {
		t.Fatal(err)
	}
	want := "Status: Stale (publisher-lease-expired): the publisher's leader Lease kube-reclaim/kube-reclaim-publisher counts as expired: no such Lease"
	if !strings.Contains(out, want) {
		t.Errorf("explain lacks %q:\n%s", want, out)
	}
}

// releasedLease is the publisher's Lease as client-go's leader election
// leaves it when its holder stops (ReleaseOnCancel): no holder, a one-second
// duration, renewed at the release.
func releasedLease(ago time.Duration) *coordinationv1.Lease {
	l := publisherLease(leaderlease.DefaultNamespace, leaderlease.DefaultName, ago)
	l.Spec.HolderIdentity = nil
	l.Spec.LeaseDurationSeconds = ptr.To[int32](1)
	return l
}

// During every publisher rollout the Lease is released until a standby takes
// it. kubectl reclaim must then say what the webhook and the extender say:
// their Tracker keeps the deadline of the last renewal (leaderlease.Next
// over the versions it watched), where the release alone would have expired
// two seconds after it.
func TestAReleasedLeaseReadsAsTheRolesReadIt(t *testing.T) {
	renewal := publisherLease(leaderlease.DefaultNamespace, leaderlease.DefaultName, 20*time.Second) // alive until now+10s
	tests := []struct {
		name            string
		versions        []*coordinationv1.Lease
		compactedBefore uint64
		wantStatus      string
	}{
		{"released 5s ago, after a renewal 20s ago", []*coordinationv1.Lease{renewal, releasedLease(5 * time.Second)}, 0, "Fresh"},
		{"released, after a renewal 40s ago", []*coordinationv1.Lease{publisherLease(leaderlease.DefaultNamespace, leaderlease.DefaultName, 40*time.Second),
			releasedLease(35 * time.Second)}, 0, "Stale: publisher-lease-expired"},
		{"released, its renewal compacted away", []*coordinationv1.Lease{renewal, releasedLease(5 * time.Second)}, 25, "Stale: publisher-lease-expired"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var roles time.Time
			for _, v := range tt.versions {
				roles = leaderlease.Next(roles, v)
			}
			if tt.compactedBefore > 0 {
				roles = leaderlease.Next(time.Time{}, tt.versions[len(tt.versions)-1]) // a Tracker started after the release
			}
			if rolesFresh := now.Before(roles); rolesFresh != (tt.wantStatus == "Fresh") {
				t.Fatalf("the roles' rule says alive = %v, the case wants %q", rolesFresh, tt.wantStatus)
			}
			last := tt.versions[len(tt.versions)-1]
			if d, _ := leaderlease.Deadline(last); now.Before(d) {
				t.Fatalf("control: the release alone (deadline %s) must read as expired at %s", d, now)
			}
			w := fourNodes()
			w.objects = w.objects[:1] // node-a, fresh by its write time
			w.leaseHistory, w.compactedBefore = tt.versions, tt.compactedBefore
			out, _, err := run(t, w, "nodes")
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "   "+tt.wantStatus+"   ") {
				t.Errorf("want status %q:\n%s", tt.wantStatus, out)
			}
		})
	}
}

func TestExplainNamesTheRenewalAReleasedLeaseKeeps(t *testing.T) {
	w := fourNodes()
	w.objects = w.objects[:1]
	w.leaseHistory = []*coordinationv1.Lease{publisherLease(leaderlease.DefaultNamespace, leaderlease.DefaultName, 20*time.Second), releasedLease(5 * time.Second)}
	out, _, err := run(t, w, "explain", "node-a", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var r ExplainReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	want := `released 5s ago; renewed 20s ago by "publisher-1", lease duration 15s`
	if l := r.PublisherLease; l == nil || !l.Alive || l.Detail != want || l.RenewTime == nil || !l.RenewTime.Equal(now.Add(-20*time.Second)) {
		t.Errorf("publisherLease = %+v, want alive, renewed 20s ago, detail %q", l, want)
	}
}
