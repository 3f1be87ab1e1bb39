package leaderlease

import (
	"errors"
	"fmt"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"

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
