// Package leasetest serves a Lease's earlier versions from a fake clientset,
// as the API server serves them from etcd (a list at an exact resource
// version), for tests of leaderlease.Read and its callers.
package leasetest

import (
	"strconv"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// History makes client hold versions of one Lease, oldest first, as they
// were written: the last is the Lease now, and each has the resource version
// of its write (10, 20, ...). A list of Leases at an exact resource version
// returns the version written at or before it, or Gone for one before
// compactedBefore (etcd compacted it); other lists pass through.
func History(client *fake.Clientset, compactedBefore uint64, versions ...*coordinationv1.Lease) {
	written := make([]*coordinationv1.Lease, len(versions))
	for i, v := range versions {
		written[i] = v.DeepCopy()
		written[i].ResourceVersion = strconv.Itoa(10 * (i + 1))
	}
	last := written[len(written)-1]
	if err := client.Tracker().Add(last.DeepCopy()); err != nil {
		panic(err)
	}
	client.PrependReactor("list", "leases", func(action k8stesting.Action) (bool, runtime.Object, error) {
		list, _ := action.(k8stesting.ListActionImpl)
		if list.ListOptions.ResourceVersionMatch != metav1.ResourceVersionMatchExact {
			return false, nil, nil
		}
		rv, err := strconv.ParseUint(list.ListOptions.ResourceVersion, 10, 64)
		if err != nil {
			return true, nil, apierrors.NewBadRequest(err.Error())
		}
		if rv < compactedBefore {
			return true, nil, apierrors.NewResourceExpired("too old resource version")
		}
		out := &coordinationv1.LeaseList{}
		for _, v := range written {
			if n, _ := strconv.ParseUint(v.ResourceVersion, 10, 64); n <= rv {
				out.Items = []coordinationv1.Lease{*v.DeepCopy()}
			}
		}
		return true, out, nil
	})
}
