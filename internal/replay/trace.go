package replay

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// Trace is a file's samples on the replay's step grid, with every pod on a
// node.
//
// Step k is the instant Start + k x Step. A sample taken at t belongs to the
// first step at or after t (it is known from then on): traces sample each
// pod on its own clock, and the policy pairs a pod sample with a node sample
// only when they are within its sampleAlignment.
type Trace struct {
	Start time.Time
	Step  time.Duration
	// Steps is the number of steps, the last one included.
	Steps int
	// Pods sorted by name.
	Pods []*PodTrace
	// Nodes in name order; Pods index into it.
	Nodes []NodeTrace
	// Packed: the file named no node and the pods were packed (see Pack).
	Packed bool
	Quirks Quirks
}

// NodeTrace is one node.
type NodeTrace struct {
	Name        string
	Allocatable reclaimable.Resources
	// Pods are indices into Trace.Pods.
	Pods []int
}

// Sample kinds of a pod at a step of its life.
const (
	// kindGap: no usable row; the pod repeats its last reading and the
	// policy gets no sample of it.
	kindGap uint8 = iota
	// kindMeasured: a usable row.
	kindMeasured
	// kindMemoryMissing: a usable row whose memory reading is missing; the
	// sample repeats the last memory reading.
	kindMemoryMissing
)

// PodTrace is one pod: present from step First to First+len(Kind)-1.
type PodTrace struct {
	Name string
	// Node indexes Trace.Nodes; -1 when the pod fits no node (left out).
	Node int
	// Requests are the largest the pod had in the file (see Quirks.RequestChanges).
	Requests reclaimable.Resources
	First    int
	// CPU and Memory are the usage at each step of the pod's life, as the
	// quirk rules make it.
	CPU, Memory []int64
	Kind        []uint8
	node        string // as the file names it
}

// Last is the last step of the pod's life.
func (p *PodTrace) Last() int { return p.First + len(p.Kind) - 1 }

// Quirks counts each rule applied to the input (docs/design.md, "Replay").
type Quirks struct {
	// Rows read, the header excluded.
	Rows int `json:"rows"`
	// ZeroRequestRows: rows with no CPU or no memory request (a VM off or a
	// gap): dropped; within the pod's life its step is a gap (GapSteps).
	ZeroRequestRows int `json:"zeroRequestRows"`
	// MemoryMissingRows: memory usage exactly 0 with a memory request: a
	// missing reading, which repeats the pod's last memory reading (its
	// memory request before its first).
	MemoryMissingRows int `json:"memoryMissingRows"`
	// CPUAboveRequestRows, MemoryAboveRequestRows: usage above the row's
	// request, clamped to it (a pod cannot use more than its VM had).
	CPUAboveRequestRows    int `json:"cpuAboveRequestRows"`
	MemoryAboveRequestRows int `json:"memoryAboveRequestRows"`
	// MergedRows: more than one usable row of a pod in one step (overlapping
	// series, duplicate timestamps): merged into one sample, the largest
	// usage of each resource.
	MergedRows int `json:"mergedRows"`
	// RealignedRows: usable rows whose time is not on the step grid, moved
	// to the next step.
	RealignedRows int `json:"realignedRows"`
	// RequestChanges: usable rows whose requests differ from the pod's
	// previous usable row; every pod is replayed at its largest requests.
	RequestChanges int `json:"requestChanges"`
	// GapSteps: steps within a pod's life (first to last usable row) with no
	// usable row: the pod repeats its last reading (its requests before the
	// first), never idle, and the policy gets no sample of it.
	GapSteps int `json:"gapSteps"`
	// PodsWithoutUsableRow: pods whose every row was dropped.
	PodsWithoutUsableRow int `json:"podsWithoutUsableRow"`
	// PodsTooLarge: pods whose requests exceed an empty node: left out.
	PodsTooLarge int `json:"podsTooLarge"`
}

type builder struct {
	o     Options
	pods  map[string][]row
	named int // rows that name a node
	rows  int
}

func newBuilder(o Options) *builder { return &builder{o: o, pods: map[string][]row{}} }

func (b *builder) add(r row) error {
	b.rows++
	if r.node != "" {
		b.named++
	}
	if b.named > 0 && b.named != b.rows {
		return errors.New("node: empty, but earlier rows name their node (name it on every row or on none)")
	}
	rows := b.pods[r.pod]
	if len(rows) > 0 && rows[0].node != r.node {
		return fmt.Errorf("pod %s on node %q, but line %d puts it on %q (a pod never moves)", r.pod, r.node, rows[0].line, rows[0].node)
	}
	b.pods[r.pod] = append(rows, r)
	return nil
}

func usable(r *row) bool { return r.req.CPUMilli > 0 && r.req.MemoryBytes > 0 }

func (b *builder) build() (*Trace, error) {
	tr := &Trace{Step: b.o.Step, Quirks: Quirks{Rows: b.rows}}
	t0, t1, ok := b.span()
	if !ok {
		return nil, errors.New("no usable row (every row lacks a CPU or a memory request)")
	}
	step := int64(b.o.Step / time.Second)
	t0 = floorDiv(t0, step) * step
	tr.Start = time.Unix(t0, 0).UTC()
	tr.Steps = int(ceilDiv(t1-t0, step)) + 1
	g := grid{t0: t0, step: step}
	for _, name := range sortedKeys(b.pods) {
		if p := g.podTrace(name, b.pods[name], &tr.Quirks); p != nil {
			tr.Pods = append(tr.Pods, p)
		}
	}
	b.place(tr)
	for _, p := range tr.Pods {
		if p.Node < 0 {
			tr.Quirks.PodsTooLarge++
		}
	}
	return tr, nil
}

// span returns the times of the first and the last usable row; false when
// no row is usable.
func (b *builder) span() (t0, t1 int64, ok bool) {
	for _, rows := range b.pods {
		for i := range rows {
			if usable(&rows[i]) {
				if !ok || rows[i].sec < t0 {
					t0 = rows[i].sec
				}
				if !ok || rows[i].sec > t1 {
					t1 = rows[i].sec
				}
				ok = true
			}
		}
	}
	return t0, t1, ok
}

// grid is the trace's steps: step seconds apart from t0.
type grid struct{ t0, step int64 }

// stepOf is the step a row at sec belongs to: the first at or after it.
func (g grid) stepOf(sec int64) int { return int(ceilDiv(sec-g.t0, g.step)) }

// podTrace builds the pod's series from its rows (sorted here), counting
// the quirks it meets; nil when no row of the pod is usable.
func (g grid) podTrace(name string, rows []row, q *Quirks) *PodTrace {
	slices.SortStableFunc(rows, func(a, b row) int { return cmp.Compare(a.sec, b.sec) })
	p := &PodTrace{Name: name, node: rows[0].node, First: -1}
	last := -1
	var prev *row
	for i := range rows {
		r := &rows[i]
		if !usable(r) {
			q.ZeroRequestRows++
			continue
		}
		p.Requests = p.Requests.Max(r.req)
		if prev != nil && prev.req != r.req {
			q.RequestChanges++
		}
		prev = r
		k := g.stepOf(r.sec)
		if p.First < 0 {
			p.First = k
		}
		last = k
	}
	if p.First < 0 {
		q.PodsWithoutUsableRow++
		return nil
	}
	n := last - p.First + 1
	p.CPU, p.Memory, p.Kind = make([]int64, n), make([]int64, n), make([]uint8, n)
	for i := range rows {
		if usable(&rows[i]) {
			g.addRow(p, &rows[i], q)
		}
	}
	p.fillGaps(q)
	return p
}

// addRow puts a usable row into its step of p: usage above the requests is
// cut to them, and two rows of one step merge (the larger usage, a missing
// memory reading yielding to a measured one).
func (g grid) addRow(p *PodTrace, r *row, q *Quirks) {
	if (r.sec-g.t0)%g.step != 0 {
		q.RealignedRows++
	}
	cpu, mem, kind := r.use.CPUMilli, r.use.MemoryBytes, kindMeasured
	if cpu > r.req.CPUMilli {
		q.CPUAboveRequestRows++
		cpu = r.req.CPUMilli
	}
	switch {
	case mem == 0:
		q.MemoryMissingRows++
		mem, kind = -1, kindMemoryMissing // filled by fillGaps
	case mem > r.req.MemoryBytes:
		q.MemoryAboveRequestRows++
		mem = r.req.MemoryBytes
	}
	j := g.stepOf(r.sec) - p.First
	if prevKind := p.Kind[j]; prevKind != kindGap {
		q.MergedRows++
		cpu = max(cpu, p.CPU[j])
		switch {
		case kind == prevKind:
			mem = max(mem, p.Memory[j])
		case prevKind == kindMeasured:
			mem, kind = p.Memory[j], kindMeasured
		}
	}
	p.CPU[j], p.Memory[j], p.Kind[j] = cpu, mem, kind
}

// fillGaps gives a missing reading the pod's last reading of that
// resource, its requests before the first: never idle.
func (p *PodTrace) fillGaps(q *Quirks) {
	lastCPU, lastMem := p.Requests.CPUMilli, p.Requests.MemoryBytes
	for j := range p.Kind {
		switch p.Kind[j] {
		case kindGap:
			q.GapSteps++
			p.CPU[j], p.Memory[j] = lastCPU, lastMem
		case kindMemoryMissing:
			lastCPU = p.CPU[j]
			p.Memory[j] = lastMem
		default:
			lastCPU, lastMem = p.CPU[j], p.Memory[j]
		}
	}
}

// place puts the pods on nodes: packed onto nodes of the trace's size when
// no row names its node, on the nodes the rows name otherwise (in name
// order).
func (b *builder) place(tr *Trace) {
	if b.named == 0 {
		tr.Packed = true
		tr.Nodes = Pack(tr.Pods, b.o.Node)
		return
	}
	names := map[string]int{}
	for _, p := range tr.Pods {
		names[p.node] = 0
	}
	for i, n := range sortedKeys(names) {
		names[n] = i
		tr.Nodes = append(tr.Nodes, NodeTrace{Name: n, Allocatable: b.o.Node})
	}
	for i, p := range tr.Pods {
		p.Node = names[p.node]
		tr.Nodes[p.Node].Pods = append(tr.Nodes[p.Node].Pods, i)
	}
}

// Pack places the pods on nodes of the given allocatable, first-fit
// decreasing: pods in decreasing order of their larger share of a node
// (then the smaller share, then name), each on the first node, in the order
// they were opened, where its requests fit beside those already placed on
// both resources, a new node when none has room. Requests never exceed
// allocatable; a pod larger than an empty node is left out (Node -1).
// Placement is for the whole trace, as if every pod ran all the time.
func Pack(pods []*PodTrace, alloc reclaimable.Resources) []NodeTrace {
	order := make([]int, len(pods))
	for i := range order {
		order[i] = i
	}
	share := func(p *PodTrace) (hi, lo float64) {
		c := float64(p.Requests.CPUMilli) / float64(alloc.CPUMilli)
		m := float64(p.Requests.MemoryBytes) / float64(alloc.MemoryBytes)
		return max(c, m), min(c, m)
	}
	slices.SortStableFunc(order, func(a, b int) int {
		ah, al := share(pods[a])
		bh, bl := share(pods[b])
		if c := cmp.Compare(bh, ah); c != 0 {
			return c
		}
		if c := cmp.Compare(bl, al); c != 0 {
			return c
		}
		return cmp.Compare(pods[a].Name, pods[b].Name)
	})
	var nodes []NodeTrace
	var used []reclaimable.Resources
	for _, i := range order {
		p := pods[i]
		p.Node = -1
		if p.Requests.CPUMilli > alloc.CPUMilli || p.Requests.MemoryBytes > alloc.MemoryBytes {
			continue
		}
		for n := range nodes {
			if u := used[n].Add(p.Requests); u.CPUMilli <= alloc.CPUMilli && u.MemoryBytes <= alloc.MemoryBytes {
				p.Node = n
				break
			}
		}
		if p.Node < 0 {
			p.Node = len(nodes)
			nodes = append(nodes, NodeTrace{Name: fmt.Sprintf("node-%03d", len(nodes)+1), Allocatable: alloc})
			used = append(used, reclaimable.Resources{})
		}
		used[p.Node] = used[p.Node].Add(p.Requests)
		nodes[p.Node].Pods = append(nodes[p.Node].Pods, i)
	}
	for n := range nodes {
		slices.Sort(nodes[n].Pods)
	}
	return nodes
}

func floorDiv(a, b int64) int64 {
	q := a / b
	if a%b != 0 && (a < 0) != (b < 0) {
		q--
	}
	return q
}

func ceilDiv(a, b int64) int64 { return -floorDiv(-a, b) }
