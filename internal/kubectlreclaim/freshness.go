package kubectlreclaim

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"

	"github.com/kube-reclaim/kube-reclaim/internal/leaderlease"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// The publisher's default leader-election Lease, which the webhook and the
// extender watch (their --publisher-lease-namespace/--publisher-lease-name).
const (
	defaultLeaseNamespace = leaderlease.DefaultNamespace
	defaultLeaseName      = leaderlease.DefaultName
)

// freshnessFlags decide, like the webhook and the extender, whether an
// annotation still counts: its write time against --stale-after, and the
// publisher's leader Lease.
type freshnessFlags struct {
	StaleAfter     time.Duration
	LeaseNamespace string
	LeaseName      string
}

func defaultFreshness() freshnessFlags {
	return freshnessFlags{StaleAfter: reclaimable.DefaultStaleAfter, LeaseNamespace: defaultLeaseNamespace, LeaseName: defaultLeaseName}
}

func (f *freshnessFlags) addFlags(fs *pflag.FlagSet) {
	fs.DurationVar(&f.StaleAfter, "stale-after", f.StaleAfter,
		"An annotation written longer ago than this counts as zero; use the --stale-after of the webhook and the extender.")
	fs.StringVar(&f.LeaseNamespace, "publisher-lease-namespace", f.LeaseNamespace, "Namespace of the publisher's leader-election Lease.")
	fs.StringVar(&f.LeaseName, "publisher-lease-name", f.LeaseName,
		"Name of the publisher's leader-election Lease; while it is missing or not renewed for two lease durations every node counts as zero, "+
			"as in the webhook and the extender. Empty: not checked.")
}

func (f *freshnessFlags) validate() []error {
	var errs []error
	if f.StaleAfter <= 0 {
		errs = append(errs, fmt.Errorf("--stale-after: %s must be positive", f.StaleAfter))
	}
	if f.LeaseName != "" {
		if msgs := validation.IsDNS1123Subdomain(f.LeaseName); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--publisher-lease-name %q: %v", f.LeaseName, msgs))
		}
		if msgs := validation.IsDNS1123Label(f.LeaseNamespace); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--publisher-lease-namespace %q: %v", f.LeaseNamespace, msgs))
		}
	}
	return errs
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

// leaderLease reads the publisher's Lease and judges it by
// leaderlease.Deadline, as leaderlease.Tracker does: no Lease, or one without
// a renew time or duration, counts as expired. A Lease that cannot be read (RBAC)
// counts as alive, with a warning: this client's rights say nothing of the
// webhook's and extender's view. Nil when the Lease is not checked.
func (f *freshnessFlags) leaderLease(ctx context.Context, kube kubernetes.Interface, now time.Time) (*LeaseReport, error) {
	if f.LeaseName == "" {
		return nil, nil
	}
	r := &LeaseReport{Namespace: f.LeaseNamespace, Name: f.LeaseName, Alive: true}
	l, err := kube.CoordinationV1().Leases(f.LeaseNamespace).Get(ctx, f.LeaseName, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		r.Alive = false
		r.Detail = "no such Lease (with a publisher run without leader election, pass --publisher-lease-name= here as to the webhook and the extender)"
		return r, nil
	case err != nil:
		r.Detail = "not taken into account: " + err.Error()
		return r, fmt.Errorf("reading the publisher Lease %s/%s: %w", f.LeaseNamespace, f.LeaseName, err)
	}
	if l.Spec.HolderIdentity != nil {
		r.Holder = *l.Spec.HolderIdentity
	}
	deadline, ok := leaderlease.Deadline(l)
	if !ok {
		r.Alive = false
		r.Detail = "the Lease has no renew time or duration"
		return r, nil
	}
	renew := l.Spec.RenewTime.Time
	d := time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	r.RenewTime = &renew
	r.Alive = now.Before(deadline)
	r.Detail = fmt.Sprintf("renewed %s ago by %q, lease duration %s", age(now, renew), r.Holder, d)
	return r, nil
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
