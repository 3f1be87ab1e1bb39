package leaderlease

import (
	"context"
	"fmt"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
)

// maxHistory bounds how many versions before a release Read looks back
// through: a publisher renews until it releases, so one is the rule.
const maxHistory = 4

// Reading is what Read found of a Lease.
type Reading struct {
	// Lease as it is now.
	Lease *coordinationv1.Lease
	// Renewal is the version whose renewal gives Deadline: Lease itself, or
	// for a released Lease the last version its holder renewed. Nil when
	// the Lease counts as dead.
	Renewal *coordinationv1.Lease
	// Deadline is the instant after which the publisher counts as dead; zero:
	// dead now.
	Deadline time.Time
	// History says why the versions before a release could not be read; the
	// Lease then counts as dead.
	History error
}

// Read judges the Lease with one look the way a Tracker that had watched it
// judges it: Next over its versions, from the last one its holder renewed.
// For a released Lease that takes the versions before the release, which the
// API server serves (a list at the exact resource version before each one)
// until etcd compacts them, every 5 minutes with kube-apiserver's defaults.
// When they cannot be read (compacted, no right to list Leases, resource
// versions that are not etcd revisions) the released Lease counts as dead, as
// it does for a Tracker started after the release. A missing Lease is the
// API server's NotFound error.
func Read(ctx context.Context, client kubernetes.Interface, namespace, name string) (Reading, error) {
	leases := client.CoordinationV1().Leases(namespace)
	l, err := leases.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return Reading{}, err
	}
	r := Reading{Lease: l}
	versions := []*coordinationv1.Lease{l} // newest first
	for cur := l; Released(cur) && len(versions) <= maxHistory; {
		prev, err := versionBefore(ctx, client, cur)
		if err != nil {
			r.History = err
			break
		}
		if prev == nil {
			break
		}
		versions = append(versions, prev)
		cur = prev
	}
	for i := len(versions) - 1; i >= 0; i-- {
		// The oldest version read is a held one, or nothing is known
		// before it: dead, as for a Tracker started then.
		v := versions[i]
		r.Deadline = Next(r.Deadline, v)
		switch {
		case r.Deadline.IsZero():
			r.Renewal = nil
		case !Released(v):
			r.Renewal = v
		}
	}
	return r, nil
}

// versionBefore returns the Lease as it was just before the write that made
// l, or nil when it did not exist then.
func versionBefore(ctx context.Context, client kubernetes.Interface, l *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	rv, err := strconv.ParseUint(l.ResourceVersion, 10, 64)
	if err != nil || rv < 2 {
		return nil, fmt.Errorf("resource version %q is not an etcd revision", l.ResourceVersion)
	}
	list, err := client.CoordinationV1().Leases(l.Namespace).List(ctx, metav1.ListOptions{
		FieldSelector:        fields.OneTermEqualSelector("metadata.name", l.Name).String(),
		ResourceVersion:      strconv.FormatUint(rv-1, 10),
		ResourceVersionMatch: metav1.ResourceVersionMatchExact,
	})
	if err != nil {
		return nil, fmt.Errorf("reading the Lease before its release: %w", err)
	}
	if len(list.Items) == 0 {
		return nil, nil
	}
	return &list.Items[0], nil
}
