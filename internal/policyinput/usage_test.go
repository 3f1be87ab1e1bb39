package policyinput

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"

	"github.com/kube-reclaim/kube-reclaim/policy"
)

// randomPodMetrics is a PodMetrics as metrics-server serves it (labels
// copied from the pod, several containers, usage in the units it writes)
// with, now and then, what the schema allows and the decoder must take
// alike: extra resources, a container without usage, no timestamp.
func randomPodMetrics(rng *rand.Rand) *metricsv1beta1.PodMetrics {
	m := &metricsv1beta1.PodMetrics{
		ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%d", rng.IntN(50)), Name: fmt.Sprintf("pod-%d", rng.IntN(1e6)),
			Labels:            map[string]string{"app": "a", "pod-template-hash": fmt.Sprint(rng.Uint32())},
			CreationTimestamp: metav1.NewTime(time.Unix(1_700_000_000+rng.Int64N(1e6), 0))},
		Window: metav1.Duration{Duration: 15 * time.Second},
	}
	if rng.IntN(10) > 0 {
		m.Timestamp = metav1.NewTime(time.Unix(1_700_000_000+rng.Int64N(1e6), rng.Int64N(1e9)))
	}
	for c := range rng.IntN(4) {
		cm := metricsv1beta1.ContainerMetrics{Name: fmt.Sprint("c", c)}
		if rng.IntN(8) > 0 {
			cm.Usage = list("cpu", fmt.Sprintf("%dn", rng.Int64N(4e9)), "memory", fmt.Sprintf("%dKi", rng.Int64N(1e7)))
		}
		if rng.IntN(4) == 0 {
			cm.Usage = list("cpu", fmt.Sprintf("%dm", rng.Int64N(4000)), "ephemeral-storage", "1Gi")
		}
		m.Containers = append(m.Containers, cm)
	}
	return m
}

func randomNodeMetrics(rng *rand.Rand) *metricsv1beta1.NodeMetrics {
	m := &metricsv1beta1.NodeMetrics{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", rng.IntN(5000)), Labels: map[string]string{"kubernetes.io/hostname": "h"}},
		Timestamp:  metav1.NewTime(time.Unix(1_700_000_000+rng.Int64N(1e6), 0)),
		Window:     metav1.Duration{Duration: 20 * time.Second},
		Usage:      list("cpu", fmt.Sprintf("%dn", rng.Int64N(64e9)), "memory", fmt.Sprintf("%dKi", rng.Int64N(1e9))),
	}
	if rng.IntN(5) == 0 {
		delete(m.Usage, "memory")
	}
	return m
}

// usageOf is what the history would take from the generated decoding.
func usageOf(ns, name string, s policy.Sample) usage {
	return usage{namespace: []byte(ns), name: []byte(name), sample: s}
}

func sameUsage(a, b usage) bool {
	return bytes.Equal(a.namespace, b.namespace) && bytes.Equal(a.name, b.name) && a.sample.Time.Equal(b.sample.Time) &&
		a.sample.CPUMilli == b.sample.CPUMilli && a.sample.MemoryBytes == b.sample.MemoryBytes
}

// The usage decoders read from an encoded item exactly the sample that
// NodeSample and PodSample give for the generated decoding of it.
func TestDecodeUsageMatchesTheGeneratedDecoder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	var u usage // reused, as readProtobufItems reuses it
	for range 500 {
		b, err := randomPodMetrics(rng).Marshal()
		if err != nil {
			t.Fatal(err)
		}
		roundTrip(t, &u, b, decodePodUsage, PodSample)
		if b, err = randomNodeMetrics(rng).Marshal(); err != nil {
			t.Fatal(err)
		}
		roundTrip(t, &u, b, decodeNodeUsage, NodeSample)
	}
}

// Bytes the schema allows but a marshaller does not write: a key given twice
// in one usage map keeps its last value, a metadata field given twice
// merges, an unknown field is skipped; and malformed items are refused.
func TestDecodeUsageFollowsTheWireFormat(t *testing.T) {
	field := func(num protowire.Number, parts ...[]byte) []byte {
		return protowire.AppendBytes(protowire.AppendTag(nil, num, protowire.BytesType), bytes.Join(parts, nil))
	}
	str := func(num protowire.Number, s string) []byte { return field(num, []byte(s)) }
	entry := func(key, quantity string) []byte { return field(2, str(1, key), field(2, str(1, quantity))) }
	varint := protowire.AppendVarint(protowire.AppendTag(nil, 100, protowire.VarintType), 7)
	at := time.Unix(1_700_000_000, 0)
	ts, _ := (&metav1.Time{Time: at}).Marshal()
	meta := field(1, str(1, "p"), str(3, "ns"))

	for _, tc := range []struct {
		name    string
		item    []byte
		want    usage
		wantErr string
	}{
		{"a key given twice keeps its last value",
			bytes.Join([][]byte{meta, field(2, ts), field(4, str(1, "c"), entry("cpu", "1"), entry("cpu", "250m"), entry("memory", "1Ki"))}, nil),
			usageOf("ns", "p", policy.Sample{Time: at, CPUMilli: 250, MemoryBytes: 1024}), ""},
		{"containers add up",
			bytes.Join([][]byte{meta, field(2, ts), field(4, entry("cpu", "1")), field(4, entry("cpu", "2"), entry("memory", "3"))}, nil),
			usageOf("ns", "p", policy.Sample{Time: at, CPUMilli: 3000, MemoryBytes: 3}), ""},
		{"metadata given twice merges; unknown fields are skipped",
			bytes.Join([][]byte{field(1, str(1, "old"), str(3, "ns")), varint, field(1, str(1, "p"), varint), field(3, protowire.AppendVarint(protowire.AppendTag(nil, 1, protowire.VarintType), uint64(15*time.Second))), field(2, ts)}, nil),
			usageOf("ns", "p", policy.Sample{Time: at}), ""},
		{"a quantity's string given twice: the last one",
			bytes.Join([][]byte{meta, field(2, ts), field(4, field(2, str(1, "cpu"), field(2, str(1, "1"), str(1, "2"))))}, nil),
			usageOf("ns", "p", policy.Sample{Time: at, CPUMilli: 2000}), ""},
		{"a quantity that does not parse", bytes.Join([][]byte{meta, field(4, entry("memory", "lots"))}, nil), usage{}, "usage memory"},
		{"an item cut short", slices.Concat(meta, []byte{0x22, 0x10, 0x0a}), usage{}, "field 4"},
		{"a tag cut short", slices.Concat(meta, []byte{0x80}), usage{}, "unexpected EOF"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var u usage
			err := decodePodUsage(tc.item, &u)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || !sameUsage(u, tc.want) {
				t.Errorf("got %s/%s %+v (%v), want %s/%s %+v", u.namespace, u.name, u.sample, err, tc.want.namespace, tc.want.name, tc.want.sample)
			}
			var pm metricsv1beta1.PodMetrics
			if err := pm.Unmarshal(tc.item); err != nil || !sameUsage(usageOf(pm.Namespace, pm.Name, PodSample(&pm)), tc.want) {
				t.Errorf("the generated decoder reads %+v (%v): the case is wrong", PodSample(&pm), err)
			}
		})
	}
}

// Whatever the bytes, the usage decoders do not panic; and for every item
// the generated types can hold (whatever the fuzzer's bytes decode to under
// the generated decoder, encoded again) they read the sample NodeSample and
// PodSample give. The bytes themselves are not compared: the generated
// decoder also takes malformed ones (a map key of any wire type, groups
// with mismatched ends) that protowire refuses.
func FuzzDecodeUsage(f *testing.F) {
	rng := rand.New(rand.NewPCG(5, 6))
	for range 8 {
		b, _ := randomPodMetrics(rng).Marshal()
		f.Add(b, false)
		b, _ = randomNodeMetrics(rng).Marshal()
		f.Add(b, true)
	}
	f.Fuzz(func(t *testing.T, b []byte, node bool) {
		var u usage
		if node {
			roundTrip(t, &u, b, decodeNodeUsage, NodeSample)
		} else {
			roundTrip(t, &u, b, decodePodUsage, PodSample)
		}
	})
}

// roundTrip decodes b with decode into u (it must not panic) and, when the
// generated decoder takes b, checks decode against sample on b encoded again
// (b itself when it came from Marshal).
func roundTrip[T any, P interface {
	*T
	metav1.Object
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}](t *testing.T, u *usage, b []byte, decode func([]byte, *usage) error, sample func(P) policy.Sample) {
	t.Helper()
	_ = decode(b, u)
	m := P(new(T))
	if m.Unmarshal(b) != nil {
		return
	}
	again, err := m.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	err = decode(again, u)
	if want := usageOf(m.GetNamespace(), m.GetName(), sample(m)); err != nil || !sameUsage(*u, want) {
		t.Fatalf("generated %s/%s %+v, usage %s/%s %+v (%v)", want.namespace, want.name, want.sample, u.namespace, u.name, u.sample, err)
	}
}

// The JSON path keeps the same usage as the protobuf one.
func TestDecodeJSONUsageMatchesProtobuf(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range 50 {
		pm := randomPodMetrics(rng)
		data, err := json.Marshal(pm)
		if err != nil {
			t.Fatal(err)
		}
		var fromJSON, fromProto usage
		if err := podItems.json(json.NewDecoder(bytes.NewReader(data)), &fromJSON); err != nil {
			t.Fatal(err)
		}
		b, _ := pm.Marshal()
		if err := podItems.protobuf(b, &fromProto); err != nil {
			t.Fatal(err)
		}
		// JSON times are whole seconds.
		fromProto.sample.Time = fromProto.sample.Time.Truncate(time.Second)
		if !sameUsage(fromJSON, fromProto) {
			t.Fatalf("item %d: json %+v, protobuf %+v", i, fromJSON, fromProto)
		}
	}
}
