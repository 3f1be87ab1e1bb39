package extender

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
)

// filterPassTTL is how long the nodes a filter call passed for a pod
// authorise a bind of that pod. kube-scheduler binds moments after it
// filtered (its binding cycle follows the scheduling cycle at once); only
// Permit waits and PreBind plugins such as volume binding stretch the gap.
// A bind refused because its filter is older only costs the scheduler a
// retry, which filters again; a longer window would let an old verdict
// authorise a bind the current state no longer supports.
const filterPassTTL = 2 * time.Minute

// filteredPods remembers, by pod UID, the record of the last pods filter
// admitted and the nodes that call passed, for bind: bind places a pod only
// on a node its own filter passed for that pod UID lately, so a forged
// /bind cannot place pods the scheduler never asked about.
//
// The record is what filter judged, from a body anything on the verbs'
// address can send, so it is trusted for nothing else: bind judges the pod
// the API server holds and requires it to be the one the record judged
// (sameDemand). Nor can a body that disagrees with the stored pod take
// the place of a record (see add).
//
// Memory is bounded whatever the callers send: at most size pods and
// maxNodes remembered (pod, node) pairs in all; the oldest pods are
// forgotten first. The node names are the node cache's own strings (see
// nodeNamesDecoder), so a remembered pair costs one string header.
type filteredPods struct {
	mu       sync.Mutex
	byUID    map[types.UID]*filterRecord
	maxNodes int
	// nodes is the number of node names held by the records in ring.
	nodes int
	// ring holds the records in insertion order, oldest at head; a record
	// replaced by a later filter of the same pod stays as an empty slot
	// until its turn comes.
	ring    []*filterRecord
	head, n int
}

// filterRecord is one filter call's verdict on one pod.
type filterRecord struct {
	pod    *podRecord
	passed []string
	at     time.Time
	// replaced: a later filter of the pod took its place in byUID.
	replaced bool
}

func newFilteredPods(size, maxNodes int) *filteredPods {
	return &filteredPods{byUID: make(map[types.UID]*filterRecord, size), ring: make([]*filterRecord, size), maxNodes: maxNodes}
}

// add records that filter judged rec at time at and passed the nodes in
// passed (copied: the caller's slice is reused), and reports whether it
// did. stored is the informer's record of the pod with rec's UID (nil when
// it has none yet). A later call for the same UID replaces the earlier one,
// as the scheduler binds on its latest attempt, but only with a pod that
// agrees with the stored one:
//
//   - when the informer holds the pod, rec is recorded only if it agrees
//     with it;
//   - when it does not (yet), rec does not replace a record it disagrees
//     with: the first stands until the informer can tell which one is the
//     pod. Should the first be the forged one, the scheduler's bind is
//     refused and its retry, once the informer has the pod, is recorded.
//
// Beyond maxNodes names the rest are not remembered; a bind there is refused
// and the scheduler retries.
func (f *filteredPods) add(rec *podRecord, passed []string, at time.Time, stored *podRecord) bool {
	if rec.uid == "" || !apiSized(rec) || (stored != nil && !rec.sameDemand(stored)) {
		return false
	}
	if len(passed) > f.maxNodes {
		passed = passed[:f.maxNodes]
	}
	r := &filterRecord{pod: rec, passed: append([]string(nil), passed...), at: at}
	f.mu.Lock()
	defer f.mu.Unlock()
	if old, ok := f.byUID[rec.uid]; ok {
		if stored == nil && !old.pod.sameDemand(rec) {
			return false
		}
		f.nodes -= len(old.passed)
		// Its slot stays in ring until its turn, holding no names.
		old.replaced, old.passed = true, nil
		delete(f.byUID, rec.uid)
	}
	for f.n > 0 && (f.n == len(f.ring) || f.nodes+len(r.passed) > f.maxNodes) {
		f.dropOldest()
	}
	f.ring[(f.head+f.n)%len(f.ring)] = r
	f.n++
	f.nodes += len(r.passed)
	f.byUID[rec.uid] = r
	return true
}

// sameDemand reports whether p and o are the same pod asking the same: its
// identity, the scheduler it names and what filter judges it by.
func (p *podRecord) sameDemand(o *podRecord) bool {
	return p.namespace == o.namespace && p.name == o.name && p.uid == o.uid && p.schedulerName == o.schedulerName &&
		p.req == o.req && p.mismatch == o.mismatch && p.unenforced == o.unenforced
}

// Bounds of what a record keeps of a pod. The API server refuses longer
// names (DNS subdomains and labels), and kube-scheduler only filters pods
// it read from the API; a forged body's longer ones are not kept, so a
// record never holds more than these whatever the body.
const (
	maxNameBytes    = 253
	maxMessageBytes = 4096
)

// apiSized reports whether rec's strings are within what a pod read from
// the API server can carry.
func apiSized(rec *podRecord) bool {
	for _, s := range []string{rec.namespace, rec.name, string(rec.uid), rec.resourceVersion, rec.nodeName, rec.schedulerName} {
		if len(s) > maxNameBytes {
			return false
		}
	}
	return len(rec.unenforced) <= maxMessageBytes
}

// dropOldest forgets the oldest record. Caller holds mu.
func (f *filteredPods) dropOldest() {
	old := f.ring[f.head]
	f.ring[f.head] = nil
	f.head = (f.head + 1) % len(f.ring)
	f.n--
	if !old.replaced {
		f.nodes -= len(old.passed)
		delete(f.byUID, old.pod.uid)
	}
}

// passed returns the record of the pod namespace/name with uid when its
// latest filter passed node, no earlier than filterPassTTL before now.
func (f *filteredPods) passed(namespace, name string, uid types.UID, node string, now time.Time) (*podRecord, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.lookupLocked(namespace, name, uid)
	if r == nil || now.Sub(r.at) > filterPassTTL {
		return nil, false
	}
	for _, n := range r.passed {
		if n == node {
			return r.pod, true
		}
	}
	return nil, false
}

// lookupLocked returns the record of uid when it is of namespace/name.
// Caller holds mu.
func (f *filteredPods) lookupLocked(namespace, name string, uid types.UID) *filterRecord {
	r := f.byUID[uid]
	if uid == "" || r == nil || r.pod.namespace != namespace || r.pod.name != name {
		return nil
	}
	return r
}

// counts reports the pods and (pod, node) pairs remembered.
func (f *filteredPods) counts() (pods, nodes int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.byUID), f.nodes
}
