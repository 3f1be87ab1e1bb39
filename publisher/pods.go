package publisher

import (
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"k8s.io/client-go/tools/cache"

	"github.com/kube-reclaim/kube-reclaim/internal/policyinput"
)

// podStore is the publisher's cache of pods, fed by client-go's reflector,
// and it keeps the records the one way the publisher reads them: grouped by
// node. An informer would hold them in its own store as well, keyed by a
// "namespace/name" string made for each, a sizeable part of a heap whose
// size is the publisher's memory goal; and a cycle used to group a listing
// of that store, a visible share of the publisher's CPU (docs/benchmarks.md,
// P4). The groups hold one pointer per pod.
//
// A pod is found in the group of its node: spec.nodeName is set once, when
// the pod is bound, and never changes after, so a pod's new record belongs
// where its old one is, and a deletion carries the node of the record it
// deletes. A pod not bound yet is not kept (no node counts it).
type podStore struct {
	mu     sync.Mutex
	byNode map[string][]*policyinput.Pod
	synced atomic.Bool
}

var _ cache.ReflectorStore = (*podStore)(nil)

func newPodStore() *podStore {
	return &podStore{byNode: map[string][]*policyinput.Pod{}}
}

// Add files a pod the watch reports as added.
func (s *podStore) Add(obj any) error { return s.Update(obj) }

// Update files the pod's new record in place of its old one, or under its
// node when it had none there (it was just bound, or the watch reports it
// for the first time).
func (s *podStore) Update(obj any) error {
	pod, err := podRecord(obj)
	if err != nil || pod.NodeName == "" {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	pods := s.byNode[pod.NodeName]
	if i := index(pods, pod); i >= 0 {
		pods[i] = pod
		return nil
	}
	s.byNode[pod.NodeName] = append(pods, pod)
	return nil
}

// Delete drops the pod. A deletion carries the pod as the watch last saw
// it, not the record the store holds, so pods are told apart as client-go's
// stores tell them apart, by namespace and name.
func (s *podStore) Delete(obj any) error {
	pod, err := podRecord(obj)
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	pods := s.byNode[pod.NodeName]
	i := index(pods, pod)
	if i < 0 {
		return nil
	}
	pods[i] = pods[len(pods)-1]
	pods[len(pods)-1] = nil
	if pods = pods[:len(pods)-1]; len(pods) == 0 {
		delete(s.byNode, pod.NodeName)
		return nil
	}
	s.byNode[pod.NodeName] = pods
	return nil
}

// Replace takes a whole listing in place of what the store holds (the
// initial list, and every relist after the watch broke); the store counts as
// synced from the first.
func (s *podStore) Replace(list []any, _ string) error {
	byNode := make(map[string][]*policyinput.Pod, len(s.byNode))
	for _, obj := range list {
		pod, err := podRecord(obj)
		if err != nil {
			return err
		}
		if pod.NodeName != "" {
			byNode[pod.NodeName] = append(byNode[pod.NodeName], pod)
		}
	}
	s.mu.Lock()
	s.byNode = byNode
	s.mu.Unlock()
	s.synced.Store(true)
	return nil
}

// Resync has nothing to do: there is no handler to notify again.
func (s *podStore) Resync() error { return nil }

// hasSynced reports whether the initial list is in.
func (s *podStore) hasSynced() bool { return s.synced.Load() }

// snapshot fills into with the groups as they are now, reusing its slices;
// nodes without pods are left out.
func (s *podStore) snapshot(into map[string][]*policyinput.Pod) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for node, pods := range into {
		if _, ok := s.byNode[node]; !ok {
			clear(pods)
			delete(into, node)
		}
	}
	for node, pods := range s.byNode {
		prev := into[node]
		if len(pods) < len(prev) {
			clear(prev[len(pods):])
		}
		into[node] = append(prev[:0], pods...)
	}
}

// podRecord is obj as the pod ListerWatcher (package compactlist) delivers it.
func podRecord(obj any) (*policyinput.Pod, error) {
	pod, ok := obj.(*policyinput.Pod)
	if !ok {
		return nil, fmt.Errorf("pod store: want a *policyinput.Pod, got %T", obj)
	}
	return pod, nil
}

func index(pods []*policyinput.Pod, pod *policyinput.Pod) int {
	return slices.IndexFunc(pods, func(p *policyinput.Pod) bool {
		return p.Name == pod.Name && p.Namespace == pod.Namespace
	})
}
