package replay

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// The two header layouts Read accepts. Columns are found by name, in any
// order; other columns are ignored.
var (
	// podColumns is the documented layout: time in Unix seconds or RFC 3339,
	// CPU and memory as Kubernetes quantities ("500m", "2", "1Gi", bytes).
	podColumns = []string{"pod", "time", "cpu_request", "memory_request", "cpu_usage", "memory_usage"}
	// bitbrainsColumns is the layout of the Bitbrains GWA-T-12 files (see
	// ../shared/traces/README.md): MHz and KB, converted by rowBitbrains.
	bitbrainsColumns = []string{"vm", "timestamp", "cpu_cores", "cpu_provisioned_mhz", "cpu_used_mhz", "memory_provisioned_kb", "memory_used_kb"}
)

// Options say how a file becomes a trace.
type Options struct {
	// Step is the replay's cycle: every sample is moved to the next multiple
	// of Step (see Trace). Default 5m.
	Step time.Duration
	// Node is the allocatable of every node, the packed ones and those the
	// file names.
	Node reclaimable.Resources
}

// DefaultStep is the sampling interval of the Bitbrains trace and of the
// published method (per machine, every 5 minutes).
const DefaultStep = 5 * time.Minute

// row is one parsed line.
type row struct {
	line     int
	pod      string
	node     string
	sec      int64
	req, use reclaimable.Resources
}

// ReadFile reads a trace file (gzip'd or not) and builds the trace.
func ReadFile(path string, o Options) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	tr, err := Read(f, o)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return tr, nil
}

// Read reads a CSV of per-pod samples, gzip'd or not (told by its first two
// bytes), applies the quirk rules and packs the pods onto nodes when the file
// names none. A malformed row is an error naming its line.
func Read(r io.Reader, o Options) (*Trace, error) {
	if o.Step <= 0 {
		o.Step = DefaultStep
	}
	if o.Step%time.Second != 0 {
		return nil, fmt.Errorf("step %s is not a whole number of seconds", o.Step)
	}
	if o.Node.CPUMilli <= 0 || o.Node.MemoryBytes <= 0 {
		return nil, errors.New("the node allocatable must be positive on both resources")
	}
	br := bufio.NewReaderSize(r, 1<<20)
	if magic, _ := br.Peek(2); bytes.Equal(magic, []byte{0x1f, 0x8b}) {
		zr, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		defer zr.Close()
		br = bufio.NewReaderSize(zr, 1<<20)
	}
	cr := csv.NewReader(br)
	cr.ReuseRecord = true
	cr.FieldsPerRecord = -1
	header, err := cr.Read()
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("line 1: the file is empty, want a header")
		}
		return nil, fmt.Errorf("line 1: %w", err)
	}
	parse, err := layout(header)
	if err != nil {
		return nil, fmt.Errorf("line 1: %w", err)
	}
	b := newBuilder(o)
	for {
		rec, err := cr.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err // csv.ParseError names the line
		}
		line, _ := cr.FieldPos(0)
		rw, err := parse(rec)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
		rw.line = line
		if err := b.add(rw); err != nil {
			return nil, fmt.Errorf("line %d: %w", line, err)
		}
	}
	return b.build()
}

// layout recognises the header and returns the row parser.
func layout(header []string) (func([]string) (row, error), error) {
	idx := map[string]int{}
	for i, h := range header {
		idx[strings.TrimSpace(strings.TrimPrefix(h, "\ufeff"))] = i
	}
	cols := func(names []string) ([]int, bool) {
		out := make([]int, len(names))
		for i, n := range names {
			j, ok := idx[n]
			if !ok {
				return nil, false
			}
			out[i] = j
		}
		return out, true
	}
	if c, ok := cols(podColumns); ok {
		nodeCol := -1
		if j, ok := idx["node"]; ok {
			nodeCol = j
		}
		return func(rec []string) (row, error) { return rowPod(rec, c, nodeCol) }, nil
	}
	if c, ok := cols(bitbrainsColumns); ok {
		return func(rec []string) (row, error) { return rowBitbrains(rec, c) }, nil
	}
	return nil, fmt.Errorf("unknown header %q: want the columns %s (node optional) or %s",
		strings.Join(header, ","), strings.Join(podColumns, ","), strings.Join(bitbrainsColumns, ","))
}

func field(rec []string, i int, name string) (string, error) {
	if i >= len(rec) {
		return "", fmt.Errorf("%d fields, column %s missing", len(rec), name)
	}
	return strings.TrimSpace(rec[i]), nil
}

func rowPod(rec []string, c []int, nodeCol int) (row, error) {
	var r row
	var err error
	if r.pod, err = field(rec, c[0], "pod"); err != nil {
		return r, err
	}
	if r.pod == "" {
		return r, errors.New("pod: empty")
	}
	ts, err := field(rec, c[1], "time")
	if err != nil {
		return r, err
	}
	if r.sec, err = parseTime(ts); err != nil {
		return r, fmt.Errorf("time: %w", err)
	}
	vals := [4]*int64{&r.req.CPUMilli, &r.req.MemoryBytes, &r.use.CPUMilli, &r.use.MemoryBytes}
	for k, name := range podColumns[2:] {
		s, err := field(rec, c[2+k], name)
		if err != nil {
			return r, err
		}
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return r, fmt.Errorf("%s: %q is not a quantity", name, s)
		}
		if q.Sign() < 0 {
			return r, fmt.Errorf("%s: %s is negative", name, s)
		}
		if k%2 == 0 { // CPU
			*vals[k] = q.MilliValue()
		} else {
			*vals[k] = q.Value()
		}
	}
	if nodeCol >= 0 && nodeCol < len(rec) {
		r.node = strings.TrimSpace(rec[nodeCol])
	}
	return r, nil
}

func parseTime(s string) (int64, error) {
	if sec, err := strconv.ParseInt(s, 10, 64); err == nil {
		return sec, nil
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return 0, fmt.Errorf("%q is neither Unix seconds nor RFC 3339", s)
	}
	return t.Unix(), nil
}

// rowBitbrains converts a Bitbrains row: requests are the provisioned
// values, usage the used ones; MHz become millicores at the row's per-core
// MHz (provisioned MHz / cores), rounded up, and KB (KiB) become bytes.
func rowBitbrains(rec []string, c []int) (row, error) {
	var r row
	var nums [6]float64
	var err error
	if r.pod, err = field(rec, c[0], "vm"); err != nil {
		return r, err
	}
	if r.pod == "" {
		return r, errors.New("vm: empty")
	}
	for k, name := range bitbrainsColumns[1:] {
		s, err := field(rec, c[1+k], name)
		if err != nil {
			return r, err
		}
		v, err := strconv.ParseFloat(s, 64)
		if err != nil || v < 0 || v != v {
			return r, fmt.Errorf("%s: %q is not a non-negative number", name, s)
		}
		nums[k] = v
	}
	r.sec = int64(nums[0])
	cores, provMHz, usedMHz, provKB, usedKB := nums[1], nums[2], nums[3], nums[4], nums[5]
	if cores > 0 && provMHz > 0 {
		r.req.CPUMilli = int64(cores * 1000)
		r.use.CPUMilli = int64(ceil(usedMHz * cores * 1000 / provMHz))
	}
	r.req.MemoryBytes = int64(provKB) * 1024
	r.use.MemoryBytes = int64(ceil(usedKB)) * 1024
	return r, nil
}

func ceil(f float64) float64 {
	i := float64(int64(f))
	if i < f {
		return i + 1
	}
	return i
}

// sortedKeys returns the keys of m in order.
func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}
