package extender

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	configv1 "k8s.io/kube-scheduler/config/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"

	"github.com/kube-reclaim/kube-reclaim/internal/leaderlease"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// Scheduler configuration shipped in deploy/scheduler and built by the
// functions below for tests and the demo (a real kube-scheduler pointed at an
// extender on 127.0.0.1).
const (
	// SchedulerName is the profile served by the kube-reclaim scheduler;
	// reclaimed pods set spec.schedulerName to it.
	SchedulerName = "kube-reclaim-scheduler"
	// DefaultURLPrefix is the extender beside its kube-scheduler: a sidecar
	// in the kube-reclaim-scheduler pod (deploy/base/scheduler), or a
	// host-network DaemonSet beside the cluster's own scheduler
	// (deploy/own-scheduler). It listens on the loopback only, so nothing
	// but that scheduler can call /filter or /bind.
	DefaultURLPrefix = "http://127.0.0.1:8888"
	// ExtenderHTTPTimeout is the scheduler's timeout for one extender call.
	ExtenderHTTPTimeout = 5 * time.Second
	// PercentageOfNodesToScore is the SchedulerName profile's share of the
	// nodes kube-scheduler looks for before it asks the extender, never
	// fewer than 100 (kube-scheduler's floor): 100 nodes up to 2,000 nodes,
	// 250 at 5,000. Every one of them costs the scheduler per pod: its
	// name travels to the extender and back in the filter call, and
	// NodeResourcesFit checks each extended resource name of the pod
	// against every node. kube-scheduler's adaptive default
	// sends 420 nodes at 1,000 and 500 at 5,000, which cost reclaimed pods
	// much of their rate against native ones (docs/benchmarks.md, P2); 5 is the floor
	// that adaptive default itself reaches at 5,625 nodes. The cost: when
	// few nodes have room, a pod may be refused by the extender on the
	// nodes of one cycle and wait for the next cycle, which starts where
	// the last one stopped.
	PercentageOfNodesToScore int32 = 5
)

// explicitExtender is a configv1.Extender that writes enableHTTPS and
// ignorable even when false (the upstream tags omit them), so that the file
// says what it means. encoding/json lets a field of the outer struct shadow
// the embedded one of the same name.
type explicitExtender struct {
	configv1.Extender `json:",inline"`
	EnableHTTPS       bool `json:"enableHTTPS"`
	Ignorable         bool `json:"ignorable"`
}

func explicit(e configv1.Extender) explicitExtender {
	return explicitExtender{Extender: e, EnableHTTPS: e.EnableHTTPS, Ignorable: e.Ignorable}
}

// schedulerConfig is the part of configv1.KubeSchedulerConfiguration this
// project sets. The upstream struct is not marshalled whole because its
// component-base leaderElection and clientConnection have no omitempty: the
// file would carry zero durations, QPS and an empty resourceLock that
// kube-scheduler only replaces with its defaults. The tests decode the
// result strictly into the upstream type.
type schedulerConfig struct {
	metav1.TypeMeta `json:",inline"`
	LeaderElection  leaderElection     `json:"leaderElection"`
	Profiles        []shippedProfile   `json:"profiles"`
	Extenders       []explicitExtender `json:"extenders"`
}

// shippedProfile is a profile whose plugins carry only the postFilter set:
// the upstream Plugins struct would write every extension point, empty
// ones included.
type shippedProfile struct {
	configv1.KubeSchedulerProfile `json:",inline"`
	Plugins                       *postFilterPlugins `json:"plugins,omitempty"`
}

type postFilterPlugins struct {
	PostFilter configv1.PluginSet `json:"postFilter"`
}

// defaultPreemption is kube-scheduler's only PostFilter plugin.
const defaultPreemption = "DefaultPreemption"

// noPreemption disables preemption in the shipped profile. kube-scheduler
// does not count the reclaimed resources (ignoredByScheduler), so it can
// never pick victims that free the room the extender refused; it would only
// preempt for its own filters (pod slots, ports, affinity), deleting pods of
// any scheduler, and kube-reclaim-scheduler has no right to delete pods.
func noPreemption(p configv1.KubeSchedulerProfile) shippedProfile {
	return shippedProfile{KubeSchedulerProfile: p,
		Plugins: &postFilterPlugins{PostFilter: configv1.PluginSet{Disabled: []configv1.Plugin{{Name: defaultPreemption}}}}}
}

// leaderElection is the part of component-base's
// LeaderElectionConfiguration that differs from kube-scheduler's defaults.
type leaderElection struct {
	LeaderElect       bool   `json:"leaderElect"`
	ResourceName      string `json:"resourceName"`
	ResourceNamespace string `json:"resourceNamespace"`
}

// legacyExtender is the pre-1.23 scheduler Policy's extender, whose types
// left k8s.io/kube-scheduler: note enableHttps and httpTimeout in
// nanoseconds (a time.Duration).
type legacyExtender struct {
	URLPrefix        string                             `json:"urlPrefix"`
	FilterVerb       string                             `json:"filterVerb"`
	PrioritizeVerb   string                             `json:"prioritizeVerb"`
	BindVerb         string                             `json:"bindVerb"`
	Weight           int64                              `json:"weight"`
	EnableHTTPS      bool                               `json:"enableHttps"`
	HTTPTimeout      int64                              `json:"httpTimeout"`
	NodeCacheCapable bool                               `json:"nodeCacheCapable"`
	ManagedResources []configv1.ExtenderManagedResource `json:"managedResources"`
	Ignorable        bool                               `json:"ignorable"`
}

func managedResources(domain string) ([]configv1.ExtenderManagedResource, error) {
	n, err := reclaimable.NewNames(domain)
	if err != nil {
		return nil, err
	}
	// ignoredByScheduler: kube-scheduler must not check the resources
	// itself; the extender is the one that knows the room (assumptions
	// included). The scheduler still sends only pods requesting them.
	return []configv1.ExtenderManagedResource{{Name: string(n.CPU), IgnoredByScheduler: true}, {Name: string(n.Memory), IgnoredByScheduler: true}}, nil
}

// extenderEntry is the extender for a KubeSchedulerConfiguration: filter
// and bind only. The profile scores the reclaimed resources in process
// (ReclaimedProfile); a prioritize call would add a second HTTP round trip
// per pod, with the pod and every node name, to the serial part of each
// scheduling cycle.
func extenderEntry(urlPrefix, domain string) (configv1.Extender, error) {
	mr, err := managedResources(domain)
	return configv1.Extender{
		URLPrefix: urlPrefix, FilterVerb: "filter", BindVerb: "bind",
		EnableHTTPS: strings.HasPrefix(urlPrefix, "https://"), HTTPTimeout: metav1.Duration{Duration: ExtenderHTTPTimeout},
		NodeCacheCapable: true, ManagedResources: mr,
		// Not ignorable: without the extender nothing guards the room.
		Ignorable: false,
	}, err
}

// toYAML marshals v, a struct of the types above, with sigs.k8s.io/yaml
// (through their json tags, as kube-scheduler reads them).
func toYAML(v any) (string, error) {
	b, err := yaml.Marshal(v)
	return string(b), err
}

// ExtenderConfigYAML returns the top-level `extenders:` list of a
// kubescheduler.config.k8s.io/v1 KubeSchedulerConfiguration for an extender
// at urlPrefix (for example "http://127.0.0.1:8888") serving the resources of
// domain. enableHTTPS follows the scheme of urlPrefix.
func ExtenderConfigYAML(urlPrefix, domain string) (string, error) {
	return ExtenderConfigYAMLWithCA(urlPrefix, domain, "")
}

// ExtenderConfigYAMLWithCA is ExtenderConfigYAML for an HTTPS extender whose
// serving certificate is signed by the CA in caFile (tlsConfig.caFile);
// empty caFile adds no tlsConfig.
func ExtenderConfigYAMLWithCA(urlPrefix, domain, caFile string) (string, error) {
	e, err := extenderEntry(urlPrefix, domain)
	if err != nil {
		return "", err
	}
	if caFile != "" {
		e.TLSConfig = &configv1.ExtenderTLSConfig{CAFile: caFile}
	}
	return toYAML(struct {
		Extenders []explicitExtender `json:"extenders"`
	}{[]explicitExtender{explicit(e)}})
}

// ReclaimedProfile returns the profile that places reclaimed pods: named
// name (SchedulerName when shipped), PercentageOfNodesToScore, and
// NodeResourcesFit scoring only the reclaimed resources of domain, the way
// strategy (StrategySpread or StrategyBinpack) ranks nodes. kube-scheduler
// scores them against the node's allocatable, which the node webhook keeps
// at the published room (never below what the node's reclaimed pods hold),
// and its own accounting of the pods on the node, assumed ones included:
// the share of the room that stays free, as the extender's prioritize verb
// ranks it. Native CPU and memory are left out of the score: reclaimed pods
// request none.
func ReclaimedProfile(name, domain, strategy string) (configv1.KubeSchedulerProfile, error) {
	n, err := reclaimable.NewNames(domain)
	if err != nil {
		return configv1.KubeSchedulerProfile{}, err
	}
	scoring := configv1.LeastAllocated
	switch strategy {
	case StrategySpread:
	case StrategyBinpack:
		scoring = configv1.MostAllocated
	default:
		return configv1.KubeSchedulerProfile{}, fmt.Errorf("strategy %q is neither %s nor %s", strategy, StrategySpread, StrategyBinpack)
	}
	args := &configv1.NodeResourcesFitArgs{ScoringStrategy: &configv1.ScoringStrategy{Type: scoring,
		Resources: []configv1.ResourceSpec{{Name: string(n.CPU), Weight: 1}, {Name: string(n.Memory), Weight: 1}}}}
	return configv1.KubeSchedulerProfile{
		SchedulerName:            &name,
		PercentageOfNodesToScore: ptr.To(PercentageOfNodesToScore),
		PluginConfig:             []configv1.PluginConfig{{Name: nodeResourcesFit, Args: runtime.RawExtension{Object: args}}},
	}, nil
}

// nodeResourcesFit is kube-scheduler's plugin that checks and scores
// resource requests.
const nodeResourcesFit = "NodeResourcesFit"

// DefaultProfile is a profile with kube-scheduler's defaults.
func DefaultProfile(name string) configv1.KubeSchedulerProfile {
	return configv1.KubeSchedulerProfile{SchedulerName: &name}
}

// ProfilesYAML returns a top-level `profiles:` list, for example
// DefaultProfile("default-scheduler") and ReclaimedProfile(SchedulerName,
// …) for one kube-scheduler serving both.
func ProfilesYAML(profiles ...configv1.KubeSchedulerProfile) (string, error) {
	return toYAML(struct {
		Profiles []configv1.KubeSchedulerProfile `json:"profiles"`
	}{profiles})
}

// KubeSchedulerConfigYAML returns the complete KubeSchedulerConfiguration
// shipped as deploy/scheduler/kube-scheduler-config.yaml: a second scheduler
// with profile SchedulerName (preemption disabled, see noPreemption), its own
// leader-election lease, and the extender.
func KubeSchedulerConfigYAML(urlPrefix, domain string) (string, error) {
	e, err := extenderEntry(urlPrefix, domain)
	if err != nil {
		return "", err
	}
	p, err := ReclaimedProfile(SchedulerName, domain, StrategySpread)
	if err != nil {
		return "", err
	}
	return toYAML(schedulerConfig{
		TypeMeta: metav1.TypeMeta{APIVersion: configv1.SchemeGroupVersion.String(), Kind: "KubeSchedulerConfiguration"},
		LeaderElection: leaderElection{
			LeaderElect: true, ResourceName: SchedulerName, ResourceNamespace: leaderlease.DefaultNamespace,
		},
		Profiles:  []shippedProfile{noPreemption(p)},
		Extenders: []explicitExtender{explicit(e)},
	})
}

// LegacyPolicyJSON returns the scheduler Policy (kind Policy, apiVersion v1)
// with the same extender, for kube-scheduler older than 1.23
// (--policy-config-file); shipped as deploy/scheduler/policy.json. The
// Policy has no profiles, so it scores through the extender's prioritize
// verb (--strategy).
func LegacyPolicyJSON(urlPrefix, domain string) (string, error) {
	e, err := extenderEntry(urlPrefix, domain)
	if err != nil {
		return "", err
	}
	policy := struct {
		Kind       string           `json:"kind"`
		APIVersion string           `json:"apiVersion"`
		Extenders  []legacyExtender `json:"extenders"`
	}{Kind: "Policy", APIVersion: "v1", Extenders: []legacyExtender{{
		URLPrefix: e.URLPrefix, FilterVerb: e.FilterVerb, PrioritizeVerb: "prioritize", BindVerb: e.BindVerb,
		Weight: 1, EnableHTTPS: e.EnableHTTPS, HTTPTimeout: int64(e.HTTPTimeout.Duration),
		NodeCacheCapable: e.NodeCacheCapable, ManagedResources: e.ManagedResources, Ignorable: e.Ignorable,
	}}}
	b, err := json.MarshalIndent(policy, "", "  ")
	return string(b) + "\n", err
}
