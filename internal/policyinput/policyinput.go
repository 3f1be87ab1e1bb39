// Package policyinput turns what the API serves (Nodes, Pods, and the
// metrics.k8s.io NodeMetrics and PodMetrics) into the policy's input, a
// policy.Node per node. The publisher and `kubectl reclaim simulate` both
// assemble their input here, so a simulation computes exactly what the
// publisher would: one implementation of which pods count, how usage series
// are keyed and which requests are already held by reclaimed pods.
//
// Package policy stays free of client-go; this package is where the API types
// meet it.
package policyinput

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/kube-reclaim/kube-reclaim/policy"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// MinScrapeInterval is the shortest interval at which metrics-server measures
// anything: a history never needs more samples per series than its age
// divided by it.
const MinScrapeInterval = 10 * time.Second

// Assembler keeps the usage history and builds the policy's view of a node
// from it. It is not safe for concurrent use (its scratch buffers are
// shared by every call); the zero value is not usable, use New.
type Assembler struct {
	names   reclaimable.Names
	hist    *policy.History
	histAge time.Duration
	scratch []policy.Sample
	pods    []policy.Pod
	// key is the scratch buffer of pod series keys (appendPodKey).
	key []byte
	// check is the scratch buffer of ownSeries.
	check []policy.Sample
}

// New returns an Assembler for the resource names of one domain. Its history
// is sized on the first Resize.
func New(names reclaimable.Names) *Assembler {
	return &Assembler{names: names}
}

// HistoryAge is how far back usage must be kept for cfg: a node's window
// reaches back from the evaluation instant by the longest window in force,
// or to its newest sample when that is older but not yet stale (the policy
// then reads that sample alone), and a pod sample counts for a node sample
// up to the sample alignment away. Nothing older is ever read, and the
// history is most of a publisher's memory.
func HistoryAge(cfg *policy.Config, metricsStaleAfter time.Duration) time.Duration {
	return max(cfg.MaxWindow(), policy.MetricsStaleAfter(metricsStaleAfter)) + cfg.MaxSampleAlignment()
}

// Resize makes the history keep age worth of samples taken at least every
// interval (MinScrapeInterval for metrics-server; shorter only for synthetic
// metrics). A different age keeps the samples within it (policy.History's
// Resize): a policy reload that changes a window or an alignment does not
// start the peaks over.
func (a *Assembler) Resize(age, interval time.Duration) {
	count := int(age/max(interval, time.Second)) + 2
	switch {
	case a.hist == nil:
		a.hist = policy.NewHistory(age, count)
	case age != a.histAge:
		a.hist.Resize(age, count)
	}
	a.histAge = age
}

// History is the usage history (nil before the first Resize).
func (a *Assembler) History() *policy.History { return a.hist }

// Prune drops samples too old to matter at now and forgets nodes and pods
// that stopped reporting.
func (a *Assembler) Prune(now time.Time) { a.hist.Prune(now) }

// AddNodeMetrics records one reading of every node and returns how many
// samples were new (metrics-server serves the same reading until its next
// scrape).
func (a *Assembler) AddNodeMetrics(items []metricsv1beta1.NodeMetrics) int {
	added := 0
	for i := range items {
		m := &items[i]
		if a.hist.AddNode(m.Name, NodeSample(m)) {
			added++
		}
	}
	return added
}

// AddPodMetrics records one reading of every pod and returns how many samples
// were new.
func (a *Assembler) AddPodMetrics(items []metricsv1beta1.PodMetrics) int {
	added := 0
	for i := range items {
		m := &items[i]
		a.key = appendPodKey(a.key[:0], m.Namespace, m.Name)
		if a.hist.AddPod(a.key, PodSample(m)) {
			added++
		}
	}
	return added
}

// NodeSample is the usage sample of a NodeMetrics.
func NodeSample(m *metricsv1beta1.NodeMetrics) policy.Sample {
	return policy.Sample{Time: m.Timestamp.Time, CPUMilli: m.Usage.Cpu().MilliValue(), MemoryBytes: m.Usage.Memory().Value()}
}

// PodSample is the usage sample of a PodMetrics: the sum of its containers.
func PodSample(m *metricsv1beta1.PodMetrics) policy.Sample {
	s := policy.Sample{Time: m.Timestamp.Time}
	for _, c := range m.Containers {
		s.CPUMilli += c.Usage.Cpu().MilliValue()
		s.MemoryBytes += c.Usage.Memory().Value()
	}
	return s
}

// appendPodKey appends the key of a pod's series to dst: PodMetrics carry no
// UID, so namespace/name. The publisher builds
// the key of every pod of the cluster twice a period, in one buffer.
func appendPodKey[S string | []byte](dst []byte, namespace, name S) []byte {
	return append(append(append(dst, namespace...), '/'), name...)
}

// Node assembles the policy's view of the named node, with the native
// capacity and allocatable of its status, from pods, the pods bound to it
// (terminal ones are skipped), and returns as well the sum of the reclaimed
// requests of its live pods: room already promised to them.
//
// The returned samples and pods live in scratch buffers that the next call
// reuses, and the pods' samples in the history: compute with in before
// assembling the next node or adding to the history.
func (a *Assembler) Node(name string, capacity, allocatable reclaimable.Resources, pods []*Pod) (in policy.Node, held reclaimable.Resources) {
	in = policy.Node{Name: name, Capacity: capacity, Allocatable: allocatable}
	// The node's series goes to a scratch buffer; the pods' are read where
	// the history keeps them (policy.Pod.Series).
	in.Samples = a.scratch[:0]
	if a.hist != nil {
		in.Samples = a.hist.AppendNode(in.Samples, name)
	}
	in.Pods = a.pods[:0]
	for _, pod := range pods {
		if pod.Terminal {
			continue
		}
		held = held.Add(pod.Reclaimed)
		pp := policy.Pod{Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID),
			Requests: pod.Requests, Reclaimed: !pod.Reclaimed.IsZero(), Grant: pod.Reclaimed, StartTime: pod.StartTime()}
		if a.hist != nil {
			if !pod.series.Live() {
				pod.series = a.ownSeries(pod)
			}
			pp.Series = pod.series
		}
		in.Pods = append(in.Pods, pp)
	}
	a.scratch, a.pods = in.Samples, in.Pods
	return in, held
}

// ownSeries returns the usage series of this pod: the series of its
// namespace/name, unless it holds a sample from before the pod was created.
// Such a sample was measured of an earlier pod of the same name, which may
// have run on another node (a StatefulSet pod recreated elsewhere, or a
// name reported by another node's kubelet before this pod existed), so the
// series is forgotten rather than credited to this pod's node; the pod counts
// as not measured until samples of its own arrive. A pod's node never changes
// once it is bound, so a series kept with one pod record is only ever read
// for that pod's node. Called once per record: the record keeps the series.
func (a *Assembler) ownSeries(pod *Pod) policy.PodSeries {
	a.key = appendPodKey(a.key[:0], pod.Namespace, pod.Name)
	s := a.hist.FindPod(a.key)
	if !s.Live() {
		return policy.PodSeries{}
	}
	// Samples are whole seconds, as is Created: a sample of the very second
	// the pod was created counts as its own.
	a.check, _ = a.hist.AppendPodSeries(a.check[:0], s)
	if len(a.check) > 0 && a.check[0].Time.Unix() < pod.Created {
		a.hist.DeletePod(string(a.key))
		return policy.PodSeries{}
	}
	return s
}

// Resources is the native cpu and memory of a resource list.
func Resources(l corev1.ResourceList) reclaimable.Resources {
	return reclaimable.Resources{CPUMilli: l.Cpu().MilliValue(), MemoryBytes: l.Memory().Value()}
}
