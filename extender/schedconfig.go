package extender

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

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
	// DefaultURLPrefix is the extender's in-cluster Service.
	DefaultURLPrefix = "http://kube-reclaim-extender.kube-reclaim.svc:8888"
	// ExtenderHTTPTimeout is the scheduler's timeout for one extender call.
	ExtenderHTTPTimeout = 5 * time.Second
)

// The structs mirror k8s.io/kube-scheduler/config/v1 (Extender,
// ExtenderManagedResource) field for field, json tags included; false
// booleans are written out on purpose so the file says what it means.
type schedulerExtender struct {
	URLPrefix        string            `json:"urlPrefix"`
	FilterVerb       string            `json:"filterVerb"`
	PrioritizeVerb   string            `json:"prioritizeVerb"`
	BindVerb         string            `json:"bindVerb"`
	Weight           int64             `json:"weight"`
	EnableHTTPS      bool              `json:"enableHTTPS"`
	HTTPTimeout      string            `json:"httpTimeout"`
	NodeCacheCapable bool              `json:"nodeCacheCapable"`
	ManagedResources []managedResource `json:"managedResources"`
	Ignorable        bool              `json:"ignorable"`
}

type managedResource struct {
	Name               string `json:"name"`
	IgnoredByScheduler bool   `json:"ignoredByScheduler"`
}

// legacyExtender mirrors the pre-1.23 scheduler Policy's extender: note
// enableHttps and httpTimeout in nanoseconds (a time.Duration).
type legacyExtender struct {
	URLPrefix        string            `json:"urlPrefix"`
	FilterVerb       string            `json:"filterVerb"`
	PrioritizeVerb   string            `json:"prioritizeVerb"`
	BindVerb         string            `json:"bindVerb"`
	Weight           int64             `json:"weight"`
	EnableHTTPS      bool              `json:"enableHttps"`
	HTTPTimeout      int64             `json:"httpTimeout"`
	NodeCacheCapable bool              `json:"nodeCacheCapable"`
	ManagedResources []managedResource `json:"managedResources"`
	Ignorable        bool              `json:"ignorable"`
}

func managedResources(domain string) ([]managedResource, error) {
	n, err := reclaimable.NewNames(domain)
	if err != nil {
		return nil, err
	}
	// ignoredByScheduler: kube-scheduler must not check the resources
	// itself; the extender is the one that knows the room (assumptions
	// included). The scheduler still sends only pods requesting them.
	return []managedResource{{Name: string(n.CPU), IgnoredByScheduler: true}, {Name: string(n.Memory), IgnoredByScheduler: true}}, nil
}

func extenderEntry(urlPrefix, domain string) (schedulerExtender, error) {
	mr, err := managedResources(domain)
	return schedulerExtender{
		URLPrefix: urlPrefix, FilterVerb: "filter", PrioritizeVerb: "prioritize", BindVerb: "bind", Weight: 1,
		EnableHTTPS: strings.HasPrefix(urlPrefix, "https://"), HTTPTimeout: ExtenderHTTPTimeout.String(),
		NodeCacheCapable: true, ManagedResources: mr,
		// Not ignorable: without the extender nothing guards the room.
		Ignorable: false,
	}, err
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
	var b strings.Builder
	b.WriteString("extenders:\n")
	b.WriteString("- urlPrefix: " + yamlString(e.URLPrefix) + "\n")
	b.WriteString("  filterVerb: " + e.FilterVerb + "\n")
	b.WriteString("  prioritizeVerb: " + e.PrioritizeVerb + "\n")
	b.WriteString("  bindVerb: " + e.BindVerb + "\n")
	b.WriteString("  weight: " + strconv.FormatInt(e.Weight, 10) + "\n")
	b.WriteString("  enableHTTPS: " + strconv.FormatBool(e.EnableHTTPS) + "\n")
	if caFile != "" {
		b.WriteString("  tlsConfig:\n    caFile: " + yamlString(caFile) + "\n")
	}
	b.WriteString("  nodeCacheCapable: " + strconv.FormatBool(e.NodeCacheCapable) + "\n")
	b.WriteString("  httpTimeout: " + e.HTTPTimeout + "\n")
	b.WriteString("  ignorable: " + strconv.FormatBool(e.Ignorable) + "\n")
	b.WriteString("  managedResources:\n")
	for _, r := range e.ManagedResources {
		b.WriteString("  - name: " + yamlString(r.Name) + "\n")
		b.WriteString("    ignoredByScheduler: " + strconv.FormatBool(r.IgnoredByScheduler) + "\n")
	}
	return b.String(), nil
}

// yamlString writes s as a plain YAML scalar when that is unambiguous (URLs,
// DNS names), double-quoted otherwise (a JSON string is valid YAML).
func yamlString(s string) string {
	plain := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune(":/._-[]", r)) {
			plain = false
		}
	}
	// Leading digits could read as numbers, and YAML 1.1 has many booleans.
	switch strings.ToLower(s) {
	case "y", "yes", "n", "no", "on", "off", "true", "false", "null":
		plain = false
	}
	if plain && strings.IndexAny(s[:1], ":[]-0123456789.") < 0 {
		return s
	}
	q, _ := json.Marshal(s)
	return string(q)
}

// ProfilesYAML returns a top-level `profiles:` list with one default profile
// per scheduler name, for example ProfilesYAML("default-scheduler",
// SchedulerName) for one kube-scheduler serving both.
func ProfilesYAML(schedulerNames ...string) string {
	var b strings.Builder
	b.WriteString("profiles:\n")
	for _, n := range schedulerNames {
		b.WriteString("- schedulerName: " + yamlString(n) + "\n")
	}
	return b.String()
}

// KubeSchedulerConfigYAML returns the complete KubeSchedulerConfiguration
// shipped as deploy/scheduler/kube-scheduler-config.yaml: a second scheduler
// with profile SchedulerName, its own leader-election lease, and the extender.
func KubeSchedulerConfigYAML(urlPrefix, domain string) (string, error) {
	ext, err := ExtenderConfigYAML(urlPrefix, domain)
	if err != nil {
		return "", err
	}
	return "apiVersion: kubescheduler.config.k8s.io/v1\n" +
		"kind: KubeSchedulerConfiguration\n" +
		"leaderElection:\n" +
		"  leaderElect: true\n" +
		"  resourceName: " + SchedulerName + "\n" +
		"  resourceNamespace: " + leaderlease.DefaultNamespace + "\n" +
		ProfilesYAML(SchedulerName) + ext, nil
}

// LegacyPolicyJSON returns the scheduler Policy (kind Policy, apiVersion v1)
// with the same extender, for kube-scheduler older than 1.23
// (--policy-config-file); shipped as deploy/scheduler/policy.json.
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
		URLPrefix: e.URLPrefix, FilterVerb: e.FilterVerb, PrioritizeVerb: e.PrioritizeVerb, BindVerb: e.BindVerb,
		Weight: e.Weight, EnableHTTPS: e.EnableHTTPS, HTTPTimeout: int64(ExtenderHTTPTimeout),
		NodeCacheCapable: e.NodeCacheCapable, ManagedResources: e.ManagedResources, Ignorable: e.Ignorable,
	}}}
	b, err := json.MarshalIndent(policy, "", "  ")
	return string(b) + "\n", err
}
