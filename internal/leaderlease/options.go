package leaderlease

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	componentbaseconfig "k8s.io/component-base/config"
	componentbaseoptions "k8s.io/component-base/config/options"

	"github.com/kube-reclaim/kube-reclaim/internal/version"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// The publisher's leader Lease, as deploy/ names it.
const (
	DefaultNamespace = "kube-reclaim"
	DefaultName      = "kube-reclaim-publisher"
)

// Staleness are the flags of a role that reads the published values (the
// webhook and the extender): when to stop trusting them. Both roles must be
// given the same values, or they disagree about which nodes have room.
type Staleness struct {
	// StaleAfter: an annotation written longer ago counts as zero.
	StaleAfter time.Duration
	// PublisherLeaseNamespace/Name: the publisher's leader Lease; while it is
	// missing or not renewed for two lease durations every node counts as
	// zero. An empty name disables the check (the annotation's write time
	// still bounds it).
	PublisherLeaseNamespace string
	PublisherLeaseName      string
}

// DefaultStaleness returns the defaults.
func DefaultStaleness() Staleness {
	return Staleness{StaleAfter: reclaimable.DefaultStaleAfter, PublisherLeaseNamespace: DefaultNamespace, PublisherLeaseName: DefaultName}
}

// AddFlags registers --stale-after and the publisher lease flags; zero says
// what happens to a node judged stale in this role.
func (s *Staleness) AddFlags(fs *pflag.FlagSet, zero string) {
	fs.DurationVar(&s.StaleAfter, "stale-after", s.StaleAfter, "A reclaimable annotation written longer ago than this counts as zero: "+zero+". Use the same value in the webhook and the extender, above one and a half times the publisher's --refresh-interval (a refresh may wait up to half an interval when many come due at once).")
	fs.StringVar(&s.PublisherLeaseNamespace, "publisher-lease-namespace", s.PublisherLeaseNamespace, "Namespace of the publisher's leader-election Lease.")
	fs.StringVar(&s.PublisherLeaseName, "publisher-lease-name", s.PublisherLeaseName, "Name of the publisher's leader-election Lease; while it is missing or not renewed for two lease durations every node counts as zero. Empty: not tracked (only the annotation's write time counts), for a publisher without leader election.")
}

// Validate reports every problem at once.
func (s *Staleness) Validate() error {
	var errs []error
	if s.StaleAfter <= 0 {
		errs = append(errs, fmt.Errorf("--stale-after must be positive, got %s", s.StaleAfter))
	}
	if s.PublisherLeaseName != "" {
		if msgs := validation.IsDNS1123Subdomain(s.PublisherLeaseName); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--publisher-lease-name %q: %v", s.PublisherLeaseName, msgs))
		}
		if msgs := validation.IsDNS1123Label(s.PublisherLeaseNamespace); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--publisher-lease-namespace %q: %v", s.PublisherLeaseNamespace, msgs))
		}
	}
	return errors.Join(errs...)
}

// NewTracker returns a tracker of the publisher's Lease, or nil (always
// alive) when the lease is not tracked.
func (s *Staleness) NewTracker(client kubernetes.Interface) *Tracker {
	if s.PublisherLeaseName == "" {
		return nil
	}
	return New(client, s.PublisherLeaseNamespace, s.PublisherLeaseName)
}

// Election are the leader-election flags of the role that holds the Lease
// (the publisher), under the names every Kubernetes component uses
// (component-base), plus the identity written in the Lease.
type Election struct {
	componentbaseconfig.LeaderElectionConfiguration
	// Identity in the Lease; hostname_<random> when empty.
	Identity string
}

// DefaultElection returns the defaults: the Lease deploy/ names, and
// client-go's usual 15 s / 10 s / 2 s.
func DefaultElection() Election {
	return Election{LeaderElectionConfiguration: componentbaseconfig.LeaderElectionConfiguration{
		LeaderElect:       true,
		LeaseDuration:     metav1.Duration{Duration: 15 * time.Second},
		RenewDeadline:     metav1.Duration{Duration: 10 * time.Second},
		RetryPeriod:       metav1.Duration{Duration: 2 * time.Second},
		ResourceLock:      resourcelock.LeasesResourceLock,
		ResourceName:      DefaultName,
		ResourceNamespace: DefaultNamespace,
	}}
}

// deprecatedElectionFlags are the names the publisher used before it took
// component-base's, kept as aliases until version.DeprecatedRemovedIn so that
// existing manifests keep working while they are moved to the new names.
var deprecatedElectionFlags = []struct{ old, current string }{
	{"leader-elect-namespace", "leader-elect-resource-namespace"},
	{"leader-elect-name", "leader-elect-resource-name"},
}

// AddFlags registers component-base's leader-election flags,
// --leader-elect-identity and the deprecated aliases.
func (e *Election) AddFlags(fs *pflag.FlagSet) {
	componentbaseoptions.BindLeaderElectionFlags(&e.LeaderElectionConfiguration, fs)
	fs.Lookup("leader-elect-resource-name").Usage += " The webhook's and the extender's --publisher-lease-name must name it too: they watch it to tell a live publisher from a dead one."
	fs.StringVar(&e.Identity, "leader-elect-identity", e.Identity, "Identity written in the leader Lease; hostname_<random> when empty.")
	for _, f := range deprecatedElectionFlags {
		// The alias shares the flag's value, so either name sets the same field.
		fs.Var(fs.Lookup(f.current).Value, f.old, "Deprecated alias of --"+f.current+", removed in "+version.DeprecatedRemovedIn+".")
		_ = fs.MarkDeprecated(f.old, "use --"+f.current+" instead; it is removed in "+version.DeprecatedRemovedIn)
	}
}

// Validate reports every problem at once; nothing is checked without
// --leader-elect.
func (e *Election) Validate() error {
	if !e.LeaderElect {
		return nil
	}
	var errs []error
	for _, d := range []struct {
		flag string
		d    time.Duration
	}{{"leader-elect-lease-duration", e.LeaseDuration.Duration}, {"leader-elect-renew-deadline", e.RenewDeadline.Duration}, {"leader-elect-retry-period", e.RetryPeriod.Duration}} {
		if d.d <= 0 {
			errs = append(errs, fmt.Errorf("--%s must be positive, got %s", d.flag, d.d))
		}
	}
	if e.RenewDeadline.Duration >= e.LeaseDuration.Duration {
		errs = append(errs, fmt.Errorf("--leader-elect-renew-deadline (%s) must be less than --leader-elect-lease-duration (%s)", e.RenewDeadline.Duration, e.LeaseDuration.Duration))
	}
	if e.ResourceLock != resourcelock.LeasesResourceLock {
		errs = append(errs, fmt.Errorf("--leader-elect-resource-lock %q: only %q is supported", e.ResourceLock, resourcelock.LeasesResourceLock))
	}
	if e.ResourceName == "" || e.ResourceNamespace == "" {
		errs = append(errs, errors.New("--leader-elect-resource-name and --leader-elect-resource-namespace are required with --leader-elect"))
	} else {
		if msgs := validation.IsDNS1123Subdomain(e.ResourceName); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--leader-elect-resource-name %q: %v", e.ResourceName, msgs))
		}
		if msgs := validation.IsDNS1123Label(e.ResourceNamespace); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("--leader-elect-resource-namespace %q: %v", e.ResourceNamespace, msgs))
		}
	}
	return errors.Join(errs...)
}
