package kubectlreclaim

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// SimulationReport is the json/yaml document of `kubectl reclaim simulate`.
type SimulationReport struct {
	metav1.TypeMeta `json:",inline"`
	// Time is the evaluation instant.
	Time time.Time `json:"time"`
	// Policy says where the policy came from; Compare, the second one.
	Policy  string `json:"policy"`
	Compare string `json:"compare,omitempty"`
	// Samples is the number of times usage was read; Note says what that
	// means for the result.
	Samples  int    `json:"samples"`
	Duration string `json:"duration"`
	Note     string `json:"note,omitempty"`
	// Installed is true when some node carries a published annotation.
	Installed bool                  `json:"installed"`
	PodShape  reclaimable.Resources `json:"podShape"`
	Items     []SimulatedNode       `json:"items"`
	Summary   SimulationSummary     `json:"summary"`
	// CompareSummary is the summary under the --compare policy.
	CompareSummary *SimulationSummary `json:"compareSummary,omitempty"`
}

// SimulatedNode is one node of the simulation.
type SimulatedNode struct {
	Name string `json:"name"`
	// Allocatable is the node's native allocatable cpu and memory.
	Allocatable reclaimable.Resources `json:"allocatable"`
	// NodeSamples is the number of usage samples of the node the policy saw.
	NodeSamples int `json:"nodeSamples"`
	// Held is the sum of the reclaimed requests of the node's live pods.
	Held            reclaimable.Resources `json:"held"`
	SimulatedResult `json:",inline"`
	// Published is the room now (the annotation's cpu/memory when fresh,
	// zero when stale); absent when the node has no annotation.
	Published      *reclaimable.Resources `json:"published,omitempty"`
	PublishedStale string                 `json:"publishedStale,omitempty"`
	// Difference is Reclaimable - Published.
	Difference *reclaimable.Resources `json:"difference,omitempty"`
	// Compare is the result under the --compare policy; its Change is
	// Compare.Reclaimable - Reclaimable.
	Compare *SimulatedResult `json:"compare,omitempty"`
}

// SimulatedResult is what one policy computes for one node.
type SimulatedResult struct {
	Policy string `json:"policy"`
	Pool   string `json:"pool,omitempty"`
	// RegularUsage is the usage of regular (not reclaimed) work the policy
	// subtracted (its peak over the window); absent when the policy does not
	// read usage or had none.
	RegularUsage *reclaimable.Resources `json:"regularUsage,omitempty"`
	Reclaimable  reclaimable.Resources  `json:"reclaimable"`
	ZeroReason   string                 `json:"zeroReason,omitempty"`
	// Change is set on a --compare result: its Reclaimable minus the first
	// policy's.
	Change *reclaimable.Resources `json:"change,omitempty"`
	// Explanation is every term of the formula (simulate NODE only).
	Explanation *reclaimable.Explanation `json:"explanation,omitempty"`
	// PodsFit is how many pods of the --pod-shape fit in Reclaimable.
	PodsFit int64 `json:"podsFit"`
}

// SimulationSummary totals one policy over the nodes.
type SimulationSummary struct {
	Nodes       int                   `json:"nodes"`
	Allocatable reclaimable.Resources `json:"allocatable"`
	Reclaimable reclaimable.Resources `json:"reclaimable"`
	// Percent of allocatable that is reclaimable.
	CPUPercent    float64 `json:"cpuPercent"`
	MemoryPercent float64 `json:"memoryPercent"`
	// NodesWorth is reclaimable over the mean allocatable of a node.
	CPUNodesWorth    float64 `json:"cpuNodesWorth"`
	MemoryNodesWorth float64 `json:"memoryNodesWorth"`
	// PodsFit is the sum over nodes of the --pod-shape pods each holds.
	PodsFit int64 `json:"podsFit"`
	// ZeroNodes counts the nodes at zero on purpose, by reason.
	ZeroNodes []ReasonCount `json:"zeroNodes,omitempty"`
}

// ReasonCount is a number of nodes with one zero reason.
type ReasonCount struct {
	Reason string `json:"reason"`
	Nodes  int    `json:"nodes"`
}
