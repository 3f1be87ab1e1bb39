package kubectlreclaim

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-reclaim/kube-reclaim/internal/leaderlease"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// stalenessFlags decide, like the webhook and the extender, whether an
// annotation still counts: its write time against --stale-after, and the
// publisher's leader Lease. They are the roles' own flags and rule
// (leaderlease.Staleness, leaderlease.Read): pass the roles' values.
type stalenessFlags struct {
	leaderlease.Staleness
}

func defaultStaleness() stalenessFlags {
	return stalenessFlags{Staleness: leaderlease.DefaultStaleness()}
}

func (f *stalenessFlags) addFlags(fs *pflag.FlagSet) {
	f.AddFlags(fs, "kubectl reclaim reports the node stale, as the webhook and the extender do with the same value")
}

func (f *stalenessFlags) validate() []error {
	if err := f.Validate(); err != nil {
		return []error{err}
	}
	return nil
}

// LeaseReport is what kubectl reclaim found of the publisher's Lease.
type LeaseReport struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Alive is false when the Lease was not renewed for two lease
	// durations: the webhook and the extender then count every node as zero.
	Alive     bool       `json:"alive"`
	Holder    string     `json:"holder,omitempty"`
	RenewTime *time.Time `json:"renewTime,omitempty"`
	// Detail says why the Lease was not taken into account, or how old it is.
	Detail string `json:"detail,omitempty"`
}

// leaderLease reads the publisher's Lease and judges it by leaderlease.Read,
// the rule of the webhook's and the extender's leaderlease.Tracker: no Lease,
// or one without a renew time or duration, counts as expired, and a released
// one keeps the deadline of its holder's last renewal. A Lease that cannot be
// read (RBAC) counts as alive, with a warning: this client's rights say
// nothing of the webhook's and extender's view. Nil when the Lease is not
// checked.
func (f *stalenessFlags) leaderLease(ctx context.Context, kube kubernetes.Interface, now time.Time) (*LeaseReport, error) {
	if f.PublisherLeaseName == "" {
		return nil, nil
	}
	r := &LeaseReport{Namespace: f.PublisherLeaseNamespace, Name: f.PublisherLeaseName, Alive: true}
	read, err := leaderlease.Read(ctx, kube, f.PublisherLeaseNamespace, f.PublisherLeaseName)
	switch {
	case apierrors.IsNotFound(err):
		r.Alive = false
		r.Detail = "no such Lease (with a publisher run without leader election, pass --publisher-lease-name= here as to the webhook and the extender)"
		return r, nil
	case err != nil:
		r.Detail = "not taken into account: " + err.Error()
		return r, fmt.Errorf("reading the publisher Lease %s/%s: %w", f.PublisherLeaseNamespace, f.PublisherLeaseName, err)
	}
	r.Alive = now.Before(read.Deadline)
	released := ""
	if leaderlease.Released(read.Lease) && read.Lease.Spec.RenewTime != nil {
		released = fmt.Sprintf("released %s ago; ", age(now, read.Lease.Spec.RenewTime.Time))
	}
	l := read.Renewal
	if l == nil {
		r.Detail = released + noRenewal(read, released != "")
		return r, nil
	}
	if l.Spec.HolderIdentity != nil {
		r.Holder = *l.Spec.HolderIdentity
	}
	renew := l.Spec.RenewTime.Time
	r.RenewTime = &renew
	r.Detail = fmt.Sprintf("%srenewed %s ago by %q, lease duration %s", released, age(now, renew), r.Holder,
		time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second)
	return r, nil
}

// noRenewal says why a Lease has no renewal that counts.
func noRenewal(read leaderlease.Reading, released bool) string {
	switch {
	case read.History != nil:
		return "its last renewal cannot be read (" + read.History.Error() + ")"
	case released:
		return "no renewal before it"
	default:
		return "the Lease has no renew time or duration"
	}
}

// judge is reclaimable.Judge with the Lease verdict; the detail of an
// expired lease says how old it is.
func judge(value string, present bool, now time.Time, staleAfter time.Duration, lease *LeaseReport) reclaimable.Freshness {
	f := reclaimable.Judge(value, present, now, staleAfter, lease == nil || lease.Alive)
	switch {
	case f.Reason != reclaimable.ReasonPublisherDown:
	case lease.RenewTime == nil:
		f.Detail = fmt.Sprintf("the publisher's leader Lease %s/%s counts as expired: %s", lease.Namespace, lease.Name, lease.Detail)
	default:
		f.Detail = fmt.Sprintf("the publisher's leader Lease %s/%s was not renewed for two lease durations (%s)", lease.Namespace, lease.Name, lease.Detail)
	}
	return f
}
