package extender

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
)

// filteredPods remembers the records of the last pods filter admitted, by
// UID, for bind. kube-scheduler binds a pod moments after filtering it, often
// before the extender's pod informer has delivered the pod (the scheduler's
// own watch is ahead of ours); without these records every such bind would
// first GET the pod, one more API call per pod against the client's QPS.
// The record is what filter judged; bind still checks room atomically, and
// the API refuses a Binding for a pod that is gone or bound.
type filteredPods struct {
	mu    sync.Mutex
	byUID map[types.UID]*podRecord
	// ring holds the UIDs in insertion order; the oldest is forgotten when
	// a new one comes, so memory stays bounded whatever the scheduler does.
	ring []types.UID
	next int
}

func newFilteredPods(size int) *filteredPods {
	return &filteredPods{byUID: make(map[types.UID]*podRecord, size), ring: make([]types.UID, size)}
}

func (f *filteredPods) add(rec *podRecord) {
	if rec.uid == "" {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.byUID[rec.uid]; ok {
		f.byUID[rec.uid] = rec
		return
	}
	if old := f.ring[f.next]; old != "" {
		delete(f.byUID, old)
	}
	f.ring[f.next] = rec.uid
	f.byUID[rec.uid] = rec
	f.next = (f.next + 1) % len(f.ring)
}

// get returns the record filter saw for the pod namespace/name with uid.
func (f *filteredPods) get(namespace, name string, uid types.UID) (*podRecord, bool) {
	if uid == "" {
		return nil, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	rec, ok := f.byUID[uid]
	if !ok || rec.namespace != namespace || rec.name != name {
		return nil, false
	}
	return rec, true
}
