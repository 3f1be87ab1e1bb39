package extender

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	jsoniter "github.com/json-iterator/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	extenderv1 "k8s.io/kube-scheduler/extender/v1"

	"github.com/kube-reclaim/kube-reclaim/internal/boundedjson"
	"github.com/kube-reclaim/kube-reclaim/placement"
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// The JSON of the extender verbs.
//
// Bodies are read by the decoders below, which walk the body with
// json-iterator's Iterator and keep only what the verbs read: of a filter
// or prioritize body the pod's metadata, the fields of its spec and status
// a podRecord is made of, and the node names; of a bind body its four
// names. Everything else is skipped, never decoded, so what a body can make
// the extender hold is bounded by construction, whatever its size:
//
//   - Nodes (full node objects, sent only to extenders that are not
//     nodeCacheCapable) is refused at its first item;
//   - containers and initContainers are refused at the first beyond
//     maxContainers, every string kept at the first beyond maxNameBytes,
//     a quantity beyond maxQuantityBytes;
//   - of resource lists only the four names the verbs read are kept;
//   - node names are looked up in the node cache, never copied (see
//     argsDecoder.addName).
//
// Keys match fields as encoding/json matches them (exactly, else ignoring
// case) and a field read twice in one object is refused, so a body the
// decoders accept reads as encoding/json would read it; the fuzz targets
// check both.
//
// Answers are encoded with json-iterator without sorting map keys
// (FailedNodes) and without escaping <, > and &: kube-scheduler reads the
// answer into a map, so the order carries nothing, and sorting thousands of
// keys was most of an answer's cost; the HTML escapes only matter for JSON
// pasted into HTML.

// answerJSON encodes the answers.
var answerJSON = jsoniter.Config{ValidateJsonRawMessage: true}.Froze()

// bodyJSON lends the iterators the decoders walk bodies with.
var bodyJSON = jsoniter.Config{}.Froze()

// Bounds of what the decoders keep of a body. A pod read from the API
// server is far within them; a body beyond them is refused with an error
// naming the field.
const (
	// maxContainers bounds containers and initContainers, each.
	maxContainers = 256
	// maxQuantityBytes bounds a resource quantity as written (the API
	// server writes them canonical, a few bytes).
	maxQuantityBytes = 64
	// maxUncachedNames bounds the node names kept by a decoder without a
	// node cache (tests); with one, the cache's size bounds them.
	maxUncachedNames = 1 << 16
)

// bodyError is a body the decoders refuse for what it holds rather than for
// its JSON syntax.
type bodyError struct {
	msg string
	// bound: the body is beyond one of the decoders' bounds (encoding/json
	// would read it).
	bound bool
}

func (e *bodyError) Error() string { return e.msg }

// Errors of the decoders besides malformed JSON.
var (
	errNoPod = &bodyError{msg: "no Pod"}
	// errNodesGiven: the body carries full Nodes, so the scheduler is not
	// configured nodeCacheCapable.
	errNodesGiven = &bodyError{msg: "carries Nodes (full node objects)"}
	// errRepeatedNames: more known names than the cache holds nodes, so the
	// list repeats names, which kube-scheduler never does.
	errRepeatedNames     = &bodyError{msg: "NodeNames repeats node names: more known names than the extender caches nodes", bound: true}
	errNotUTF8           = &bodyError{msg: "the body is not valid UTF-8"}
	errTooManyContainers = &bodyError{msg: fmt.Sprintf("more than %d containers", maxContainers), bound: true}
	errTrailing          = &bodyError{msg: "data after the JSON object"}
)

// fieldError says where in the body an error is: the path of fields and
// array indexes down to the value, as in Pod.spec.containers[2].resources.
type fieldError struct {
	path string
	err  error
}

func (e *fieldError) Error() string { return e.path + ": " + e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }

// at puts name (a field, or an index "[i]") in front of the path of the
// error at iter.
func at(iter *jsoniter.Iterator, name string) {
	var fe *fieldError
	if !errors.As(iter.Error, &fe) {
		iter.Error = &fieldError{path: name, err: iter.Error}
		return
	}
	if fe.path[0] == '[' {
		fe.path = name + fe.path
	} else {
		fe.path = name + "." + fe.path
	}
}

// fail sets the error at iter, unless there is one already.
func fail(iter *jsoniter.Iterator, err error) {
	if iter.Error == nil {
		iter.Error = err
	}
}

// expect fails iter with a value of the wrong kind.
func expect(iter *jsoniter.Iterator, want string) {
	fail(iter, &bodyError{msg: "expects " + want + ", found " + kindOf(iter.WhatIsNext())})
}

func kindOf(t jsoniter.ValueType) string {
	switch t {
	case jsoniter.StringValue:
		return "a string"
	case jsoniter.NumberValue:
		return "a number"
	case jsoniter.NilValue:
		return "null"
	case jsoniter.BoolValue:
		return "a boolean"
	case jsoniter.ArrayValue:
		return "an array"
	case jsoniter.ObjectValue:
		return "an object"
	}
	return "no JSON value"
}

// fields are the keys of one JSON object a decoder reads.
type fields []string

// index returns the field key names, as encoding/json matches a key to a
// struct field: exactly, else ignoring case (with Unicode simple folding,
// as strings.EqualFold). -1: none.
func (fs fields) index(key string) int {
	for i, f := range fs {
		if key == f {
			return i
		}
	}
	for i, f := range fs {
		if strings.EqualFold(key, f) {
			return i
		}
	}
	return -1
}

// readObject reads the object at iter, or null (present false). For each
// key naming one of fs it calls read with the field's index, which must
// read the value; every other value is skipped. A field named twice is
// refused: encoding/json would merge the two, and kube-scheduler never
// writes one twice.
func readObject(iter *jsoniter.Iterator, fs fields, read func(i int)) (present bool) {
	switch iter.WhatIsNext() {
	case jsoniter.NilValue:
		iter.ReadNil()
		return false
	case jsoniter.ObjectValue:
	default:
		expect(iter, "an object")
		return false
	}
	var seen uint64
	iter.ReadObjectCB(func(iter *jsoniter.Iterator, key string) bool {
		if iter.Error != nil {
			return false
		}
		i := fs.index(key)
		if i < 0 {
			iter.Skip()
			return iter.Error == nil
		}
		if seen&(1<<i) != 0 {
			fail(iter, &bodyError{msg: "the field is repeated"})
			at(iter, fs[i])
			return false
		}
		seen |= 1 << i
		read(i)
		if iter.Error != nil {
			at(iter, fs[i])
			return false
		}
		return true
	})
	return iter.Error == nil
}

// readArray reads the array at iter, or null, calling read for each
// element, which must read it; an element beyond limit (none when
// negative) is refused with tooMany before it is read.
func readArray(iter *jsoniter.Iterator, limit int, tooMany error, read func(i int)) {
	switch iter.WhatIsNext() {
	case jsoniter.NilValue:
		iter.ReadNil()
		return
	case jsoniter.ArrayValue:
	default:
		expect(iter, "an array")
		return
	}
	boundedjson.Items(iter, limit, func() { fail(iter, tooMany) }, func(i int) bool {
		read(i)
		if iter.Error != nil {
			at(iter, "["+strconv.Itoa(i)+"]")
			return false
		}
		return true
	})
}

// readName reads a string (null reads as "") of at most maxNameBytes bytes:
// the names of objects, which the API server bounds so.
func readName(iter *jsoniter.Iterator) string {
	switch iter.WhatIsNext() {
	case jsoniter.NilValue:
		iter.ReadNil()
		return ""
	case jsoniter.StringValue:
	default:
		expect(iter, "a string")
		return ""
	}
	s := iter.ReadString()
	if len(s) > maxNameBytes {
		fail(iter, &bodyError{msg: fmt.Sprintf("longer than %d bytes, more than the API server allows", maxNameBytes), bound: true})
		return ""
	}
	return s
}

// finish checks that nothing but white space follows the value read, and
// returns the decoding error, if any, in words (see explain).
func finish(iter *jsoniter.Iterator, body []byte) error {
	if err := boundedjson.Rest(iter, errTrailing); err != nil {
		return explain(body, err)
	}
	return nil
}

// explain returns err, unless the body is not JSON at all: then
// encoding/json's syntax error, which says where in its own words (the
// decoders stop at the first problem they meet, and json-iterator's errors
// quote the body around it). A body refused for a bound, or for Nodes, is
// not read further.
func explain(body []byte, err error) error {
	var be *bodyError
	if errors.As(err, &be) && (be.bound || be == errNodesGiven) {
		return err
	}
	// Decoding into an empty struct scans the body and keeps nothing.
	var syntax *json.SyntaxError
	if jerr := json.Unmarshal(body, &struct{}{}); errors.As(jerr, &syntax) {
		return jerr
	}
	return err
}

// argsDecoder reads the body of a filter or prioritize call
// (kube-scheduler's ExtenderArgs) into a request: the pod's record in rec,
// the node names the cache holds in names (with their cache entries in
// entries) and the count of the others in unknown.
type argsDecoder struct {
	names reclaimable.Names
	// cache: node names are looked up in it (nil: every name is kept).
	cache *placement.Cache
	// pods: a body's pod is answered for the informer's record when it
	// names the object the informer holds (nil: never).
	pods podSource
}

var (
	argsFields      = fields{"Pod", "Nodes", "NodeNames"}
	podFields       = fields{"metadata", "spec", "status"}
	metaFields      = fields{"namespace", "name", "uid", "resourceVersion", "creationTimestamp"}
	specFields      = fields{"nodeName", "schedulerName", "containers", "initContainers", "overhead"}
	containerFields = fields{"name", "restartPolicy", "resources"}
	resourceFields  = fields{"requests", "limits"}
	statusFields    = fields{"phase"}
	listFields      = fields{"items"}
)

// decode reads body into rq. An error is errNoPod, errNodesGiven, another
// *bodyError (possibly in a *fieldError) or malformed JSON.
func (d *argsDecoder) decode(body []byte, rq *request) error {
	rq.names, rq.entries, rq.unknown, rq.rec, rq.fromInformer = rq.names[:0], rq.entries[:0], 0, nil, false
	if !utf8.Valid(body) {
		return errNotUTF8
	}
	iter := bodyJSON.BorrowIterator(body)
	defer bodyJSON.ReturnIterator(iter)
	if next := iter.WhatIsNext(); next != jsoniter.ObjectValue && next != jsoniter.NilValue {
		expect(iter, "a JSON object")
		return explain(body, iter.Error)
	}
	readObject(iter, argsFields, func(i int) {
		switch i {
		case 0:
			d.readPod(iter, rq)
		case 1:
			// Refused at its first item, whatever follows.
			readObject(iter, listFields, func(int) { readArray(iter, 0, errNodesGiven, func(int) {}) })
		case 2:
			d.readNames(iter, rq)
		}
	})
	if err := finish(iter, body); err != nil {
		rq.names, rq.entries, rq.unknown, rq.rec, rq.fromInformer = rq.names[:0], rq.entries[:0], 0, nil, false
		return err
	}
	if rq.rec == nil {
		return errNoPod
	}
	return nil
}

// readNames reads NodeNames, each name looked up in the cache (see addName)
// under one read lock.
func (d *argsDecoder) readNames(iter *jsoniter.Iterator, rq *request) {
	if d.cache != nil {
		d.cache.RLock()
		defer d.cache.RUnlock()
	}
	// Bounded by addName.
	readArray(iter, -1, nil, func(int) {
		var name []byte
		switch iter.WhatIsNext() {
		case jsoniter.NilValue: // null reads as "", as encoding/json reads it
			iter.ReadNil()
		case jsoniter.StringValue:
			name = d.readString(iter, rq)
		default:
			expect(iter, "a string")
			return
		}
		if iter.Error == nil {
			if err := d.addName(name, rq); err != nil {
				fail(iter, err)
			}
		}
	})
}

// readString returns the string at iter without allocating one when it has
// no escape sequence: the bytes are valid until rq.scratch is used again.
func (d *argsDecoder) readString(iter *jsoniter.Iterator, rq *request) []byte {
	raw := iter.SkipAndAppendBytes(rq.scratch[:0])
	rq.scratch = raw[:0]
	if iter.Error != nil || len(raw) < 2 {
		return nil
	}
	s := raw[1 : len(raw)-1]
	for _, c := range s {
		if c == '\\' {
			sub := bodyJSON.BorrowIterator(raw)
			defer bodyJSON.ReturnIterator(sub)
			return []byte(sub.ReadString())
		}
	}
	return s
}

// addName takes the node name in b (not kept). With a cache, only names
// the cache holds are kept, as the cache's own string (the scheduler sends
// the same names on every call), with their entry, which the verb then
// needs no second lookup for; the others are only counted: kube-scheduler
// drops every node an answer does not list, so an unknown name needs no
// entry of its own, and a body of a million names the cache does not hold
// costs no memory beyond the body. The caller holds the cache's read lock.
func (d *argsDecoder) addName(b []byte, rq *request) error {
	if d.cache == nil {
		if len(rq.names) >= maxUncachedNames {
			return &bodyError{msg: fmt.Sprintf("more than %d node names", maxUncachedNames), bound: true}
		}
		rq.names = append(rq.names, string(b))
		return nil
	}
	e := d.cache.EntryLocked(b)
	if e == nil {
		rq.unknown++
		return nil
	}
	// Known names are bounded by the cache, unless the body repeats them.
	if len(rq.names) >= d.cache.LenLocked() {
		return errRepeatedNames
	}
	rq.names = append(rq.names, e.Name())
	rq.entries = append(rq.entries, e)
	return nil
}

// readPod reads the pod into rq.rec: the informer's record when the
// pod's metadata names, by namespace, name, UID and resourceVersion, the
// object the informer holds (one resourceVersion is one stored object, so
// what the body says beyond its metadata is what the record was made from,
// and the rest of the pod is skipped); otherwise a record made from the
// fields of the body's pod that newPodRecord reads, the only ones decoded.
func (d *argsDecoder) readPod(iter *jsoniter.Iterator, rq *request) {
	var p corev1.Pod
	var stored *podRecord
	present := readObject(iter, podFields, func(i int) {
		switch {
		case i == 0:
			readObject(iter, metaFields, func(i int) { readMeta(iter, &p.ObjectMeta, i) })
			if iter.Error == nil {
				stored = d.stored(&p.ObjectMeta)
			}
		case stored != nil:
			iter.Skip()
		case i == 1:
			readObject(iter, specFields, func(i int) { d.readSpec(iter, &p.Spec, i, rq) })
		case i == 2:
			readObject(iter, statusFields, func(int) { p.Status.Phase = corev1.PodPhase(readName(iter)) })
		}
	})
	switch {
	case !present || iter.Error != nil:
	case stored != nil:
		rq.rec, rq.fromInformer = stored, true
	default:
		rq.rec = newPodRecord(d.names, &p)
	}
}

// stored returns the informer's record of the pod m names exactly, nil
// when the informer holds no such object.
func (d *argsDecoder) stored(m *metav1.ObjectMeta) *podRecord {
	if d.pods == nil || m.UID == "" || m.ResourceVersion == "" {
		return nil
	}
	rec, found := d.pods.pod(m.Namespace, m.Name)
	if !found || rec.uid != m.UID || rec.resourceVersion != m.ResourceVersion {
		return nil
	}
	return rec
}

// readMeta reads field i of metaFields.
func readMeta(iter *jsoniter.Iterator, m *metav1.ObjectMeta, i int) {
	switch i {
	case 0:
		m.Namespace = readName(iter)
	case 1:
		m.Name = readName(iter)
	case 2:
		m.UID = types.UID(readName(iter))
	case 3:
		m.ResourceVersion = readName(iter)
	case 4:
		// As metav1.Time reads it: null, or an RFC 3339 string.
		s := readName(iter)
		if s == "" || iter.Error != nil {
			return
		}
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			fail(iter, &bodyError{msg: err.Error()})
			return
		}
		m.CreationTimestamp = metav1.NewTime(t)
	}
}

// readSpec reads field i of specFields.
func (d *argsDecoder) readSpec(iter *jsoniter.Iterator, s *corev1.PodSpec, i int, rq *request) {
	switch i {
	case 0:
		s.NodeName = readName(iter)
	case 1:
		s.SchedulerName = readName(iter)
	case 2:
		s.Containers = d.readContainers(iter, s.Containers, rq)
	case 3:
		s.InitContainers = d.readContainers(iter, s.InitContainers, rq)
	case 4:
		s.Overhead = d.readResources(iter, rq)
	}
}

func (d *argsDecoder) readContainers(iter *jsoniter.Iterator, cs []corev1.Container, rq *request) []corev1.Container {
	readArray(iter, maxContainers, errTooManyContainers, func(int) {
		cs = append(cs, corev1.Container{})
		c := &cs[len(cs)-1]
		readObject(iter, containerFields, func(i int) {
			switch i {
			case 0:
				c.Name = readName(iter)
			case 1:
				if p := corev1.ContainerRestartPolicy(readName(iter)); p != "" {
					c.RestartPolicy = &p
				}
			case 2:
				readObject(iter, resourceFields, func(i int) {
					if i == 0 {
						c.Resources.Requests = d.readResources(iter, rq)
					} else {
						c.Resources.Limits = d.readResources(iter, rq)
					}
				})
			}
		})
	})
	return cs
}

// readResources reads a resource list, keeping the quantities of the
// reclaimed resources and of native cpu and memory, the only ones the
// verbs read; a key written twice keeps its last value, as encoding/json
// does with a map.
func (d *argsDecoder) readResources(iter *jsoniter.Iterator, rq *request) corev1.ResourceList {
	switch iter.WhatIsNext() {
	case jsoniter.NilValue:
		iter.ReadNil()
		return nil
	case jsoniter.ObjectValue:
	default:
		expect(iter, "an object of quantities")
		return nil
	}
	l := corev1.ResourceList{}
	iter.ReadMapCB(func(iter *jsoniter.Iterator, key string) bool {
		if iter.Error != nil {
			return false
		}
		name := corev1.ResourceName(key)
		if name != d.names.CPU && name != d.names.Memory && name != corev1.ResourceCPU && name != corev1.ResourceMemory {
			iter.Skip()
			return iter.Error == nil
		}
		q := readQuantity(iter, rq)
		if iter.Error != nil {
			at(iter, key)
			return false
		}
		l[name] = q
		return true
	})
	return l
}

// readQuantity reads a quantity as resource.Quantity's UnmarshalJSON reads
// it from encoding/json, and no longer than maxQuantityBytes.
func readQuantity(iter *jsoniter.Iterator, rq *request) resource.Quantity {
	var q resource.Quantity
	switch iter.WhatIsNext() {
	case jsoniter.NilValue, jsoniter.StringValue, jsoniter.NumberValue:
	default:
		expect(iter, "a quantity")
		return q
	}
	raw := iter.SkipAndAppendBytes(rq.scratch[:0])
	rq.scratch = raw[:0]
	switch {
	case iter.Error != nil:
	case len(raw) > maxQuantityBytes:
		fail(iter, &bodyError{msg: fmt.Sprintf("a quantity longer than %d bytes", maxQuantityBytes), bound: true})
	default:
		if err := q.UnmarshalJSON(raw); err != nil {
			fail(iter, &bodyError{msg: err.Error()})
		}
	}
	return q
}

var bindFields = fields{"PodName", "PodNamespace", "PodUID", "Node"}

// decodeBindArgs reads the body of a bind call (kube-scheduler's
// ExtenderBindingArgs): four names, each at most maxNameBytes long.
func decodeBindArgs(body []byte) (*extenderv1.ExtenderBindingArgs, error) {
	if !utf8.Valid(body) {
		return nil, errNotUTF8
	}
	iter := bodyJSON.BorrowIterator(body)
	defer bodyJSON.ReturnIterator(iter)
	if next := iter.WhatIsNext(); next != jsoniter.ObjectValue && next != jsoniter.NilValue {
		expect(iter, "a JSON object")
		return nil, explain(body, iter.Error)
	}
	args := &extenderv1.ExtenderBindingArgs{}
	readObject(iter, bindFields, func(i int) {
		s := readName(iter)
		switch i {
		case 0:
			args.PodName = s
		case 1:
			args.PodNamespace = s
		case 2:
			args.PodUID = types.UID(s)
		case 3:
			args.Node = s
		}
	})
	if err := finish(iter, body); err != nil {
		return nil, err
	}
	return args, nil
}
