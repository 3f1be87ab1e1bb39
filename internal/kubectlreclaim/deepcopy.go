package kubectlreclaim

import (
	"maps"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// The printers of k8s.io/cli-runtime take a runtime.Object and may copy it
// (the managedFields filter deep-copies lists), so the documents implement
// DeepCopyObject. Written by hand: the module has no code generator, and
// TestDeepCopiesShareNothing guards them against a field added later.

func copyTime(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	c := *t
	return &c
}

func copyRequest(r *reclaimable.Resources) *reclaimable.Resources {
	if r == nil {
		return nil
	}
	c := *r
	return &c
}

// DeepCopy returns an independent copy of l.
func (l *NodeList) DeepCopy() *NodeList {
	if l == nil {
		return nil
	}
	c := *l
	if l.PublisherLease != nil {
		c.PublisherLease = l.PublisherLease.DeepCopy()
	}
	if l.Items != nil {
		c.Items = make([]NodeReport, len(l.Items))
		for i := range l.Items {
			c.Items[i] = *l.Items[i].DeepCopy()
		}
	}
	return &c
}

// DeepCopyObject implements runtime.Object.
func (l *NodeList) DeepCopyObject() runtime.Object { return l.DeepCopy() }

// DeepCopy returns an independent copy of r.
func (r *NodeReport) DeepCopy() *NodeReport {
	c := *r
	c.Usage = copyRequest(r.Usage)
	c.UsageTime = copyTime(r.UsageTime)
	if r.Annotation != nil {
		a := *r.Annotation
		a.MetricsTime = copyTime(r.Annotation.MetricsTime)
		a.Held = copyRequest(r.Annotation.Held)
		c.Annotation = &a
	}
	return &c
}

// DeepCopy returns an independent copy of r.
func (r *LeaseReport) DeepCopy() *LeaseReport {
	c := *r
	c.RenewTime = copyTime(r.RenewTime)
	return &c
}

// DeepCopyObject implements runtime.Object.
func (l *PodList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	c := *l
	c.Items = slices.Clone(l.Items)
	for i := range c.Items {
		c.Items[i].Rewritten = maps.Clone(l.Items[i].Rewritten)
	}
	return &c
}

// DeepCopyObject implements runtime.Object.
func (r *PodExplainReport) DeepCopyObject() runtime.Object {
	if r == nil {
		return nil
	}
	c := *r
	c.Rewritten = maps.Clone(r.Rewritten)
	if r.Priority != nil {
		p := *r.Priority
		c.Priority = &p
	}
	if r.Containers != nil {
		c.Containers = make([]ContainerResources, len(r.Containers))
		for i, cr := range r.Containers {
			c.Containers[i] = ContainerResources{Name: cr.Name, Init: cr.Init, Requests: cr.Requests.DeepCopy(), Limits: cr.Limits.DeepCopy()}
		}
	}
	return &c
}

// DeepCopyObject implements runtime.Object.
func (r *ExplainReport) DeepCopyObject() runtime.Object {
	if r == nil {
		return nil
	}
	c := *r
	if r.PublisherLease != nil {
		c.PublisherLease = r.PublisherLease.DeepCopy()
	}
	c.Evaluated = copyRequest(r.Evaluated)
	if r.Annotation != nil {
		a := *r.Annotation
		a.Held = copyRequest(r.Annotation.Held)
		if e := r.Annotation.Explanation; e != nil {
			a.Explanation = &reclaimable.Explanation{
				CPU:    reclaimable.ResourceExplanation{Terms: slices.Clone(e.CPU.Terms), Result: e.CPU.Result},
				Memory: reclaimable.ResourceExplanation{Terms: slices.Clone(e.Memory.Terms), Result: e.Memory.Result},
			}
		}
		c.Annotation = &a
	}
	return &c
}

// DeepCopyObject implements runtime.Object.
func (r *SimulationReport) DeepCopyObject() runtime.Object {
	if r == nil {
		return nil
	}
	c := *r
	if r.Items != nil {
		c.Items = make([]SimulatedNode, len(r.Items))
		for i := range r.Items {
			c.Items[i] = r.Items[i].deepCopy()
		}
	}
	c.Summary = r.Summary.deepCopy()
	if r.CompareSummary != nil {
		s := r.CompareSummary.deepCopy()
		c.CompareSummary = &s
	}
	return &c
}

func (n *SimulatedNode) deepCopy() SimulatedNode {
	c := *n
	c.SimulatedResult = n.SimulatedResult.deepCopy()
	c.Published = copyRequest(n.Published)
	c.Difference = copyRequest(n.Difference)
	if n.Compare != nil {
		r := n.Compare.deepCopy()
		c.Compare = &r
	}
	return c
}

func (r *SimulatedResult) deepCopy() SimulatedResult {
	c := *r
	c.RegularUsage = copyRequest(r.RegularUsage)
	c.Change = copyRequest(r.Change)
	if e := r.Explanation; e != nil {
		c.Explanation = &reclaimable.Explanation{
			CPU:    reclaimable.ResourceExplanation{Terms: slices.Clone(e.CPU.Terms), Result: e.CPU.Result},
			Memory: reclaimable.ResourceExplanation{Terms: slices.Clone(e.Memory.Terms), Result: e.Memory.Result},
		}
	}
	return c
}

func (s *SimulationSummary) deepCopy() SimulationSummary {
	c := *s
	c.ZeroNodes = slices.Clone(s.ZeroNodes)
	return c
}
