package policyinput

import (
	"encoding/json"
	"fmt"
	"unsafe"

	"google.golang.org/protobuf/encoding/protowire"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-reclaim/kube-reclaim/policy"
)

// usage is what the history takes of one NodeMetrics or PodMetrics: its
// namespace and name (the series key) and its sample. The byte slices are
// reused from item to item.
type usage struct {
	namespace, name []byte
	sample          policy.Sample
}

// Field numbers of the metrics.k8s.io/v1beta1 and meta/v1 protobuf schema
// (k8s.io/metrics generated.proto) that a usage sample is made of.
const (
	metricsMetaField      = 1 // NodeMetrics.metadata, PodMetrics.metadata
	metricsTimestampField = 2 // NodeMetrics.timestamp, PodMetrics.timestamp
	metricsUsageField     = 4 // NodeMetrics.usage: map<string, Quantity>; PodMetrics.containers: repeated ContainerMetrics
	containerUsageField   = 2 // ContainerMetrics.usage: map<string, Quantity>
	objectMetaNameField   = 1 // ObjectMeta.name
	objectMetaNSField     = 3 // ObjectMeta.namespace
	mapEntryKeyField      = 1
	mapEntryValueField    = 2
	quantityStringField   = 1 // Quantity.string, its only field
)

// decodeNodeUsage reads the usage sample of one encoded NodeMetrics into u.
//
// Why not the generated Unmarshal: it decodes every label metrics-server
// copies from the node, and a map per usage list, to be dropped at once;
// here only the key, the timestamp and two quantities are read (the
// timestamp and the quantities by their own generated decoders). The result
// is the one NodeSample gives for the generated decoding of the same bytes
// (TestDecodeUsageMatchesTheGeneratedDecoder, FuzzDecodeUsage).
func decodeNodeUsage(b []byte, u *usage) error {
	return decodeItem(b, u, func(v []byte) error {
		return readUsageEntry(v, &u.sample.CPUMilli, &u.sample.MemoryBytes)
	})
}

// decodePodUsage reads the usage sample of one encoded PodMetrics into u:
// the sum of its containers' usage, as PodSample sums them (see
// decodeNodeUsage for why).
func decodePodUsage(b []byte, u *usage) error {
	return decodeItem(b, u, func(container []byte) error {
		// A container's usage is a map: a key given twice keeps its last
		// value, so the container is summed once it is read.
		var cpu, mem int64
		err := walk(container, func(num protowire.Number, v []byte) error {
			if num != containerUsageField {
				return nil
			}
			return readUsageEntry(v, &cpu, &mem)
		})
		u.sample.CPUMilli += cpu
		u.sample.MemoryBytes += mem
		return err
	})
}

// decodeItem reads the metadata and timestamp of a NodeMetrics or
// PodMetrics into u and passes each occurrence of field 4 (a node's usage
// map entry, a pod's container) to usageField.
func decodeItem(b []byte, u *usage, usageField func([]byte) error) error {
	reset(u)
	return walk(b, func(num protowire.Number, v []byte) error {
		switch num {
		case metricsMetaField:
			return readMeta(v, u)
		case metricsTimestampField:
			return readTime(v, u)
		case metricsUsageField:
			return usageField(v)
		}
		return nil
	})
}

func reset(u *usage) {
	*u = usage{namespace: u.namespace[:0], name: u.name[:0]}
}

// walk calls field for every length-delimited field of the message b, in
// order, and skips the others (every field the usage decoders read is
// length-delimited).
func walk(b []byte, field func(protowire.Number, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return protowire.ParseError(n)
		}
		b = b[n:]
		if typ != protowire.BytesType {
			n = protowire.ConsumeFieldValue(num, typ, b)
			if n < 0 {
				return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
		}
		b = b[n:]
		if err := field(num, v); err != nil {
			return err
		}
	}
	return nil
}

// readMeta keeps the name and namespace of an ObjectMeta. A metadata field
// given twice merges, as in the generated decoder.
func readMeta(b []byte, u *usage) error {
	return walk(b, func(num protowire.Number, v []byte) error {
		switch num {
		case objectMetaNameField:
			u.name = append(u.name[:0], v...)
		case objectMetaNSField:
			u.namespace = append(u.namespace[:0], v...)
		}
		return nil
	})
}

func readTime(b []byte, u *usage) error {
	var t metav1.Time
	if err := t.Unmarshal(b); err != nil {
		return fmt.Errorf("timestamp: %w", err)
	}
	u.sample.Time = t.Time
	return nil
}

// readUsageEntry reads one entry of a usage map into cpu (millicores) or
// mem (bytes) when its key is cpu or memory.
func readUsageEntry(b []byte, cpu, mem *int64) error {
	var key, value []byte
	err := walk(b, func(num protowire.Number, v []byte) error {
		switch num {
		case mapEntryKeyField:
			key = v
		case mapEntryValueField:
			value = v
		}
		return nil
	})
	if err != nil {
		return err
	}
	var q resource.Quantity
	switch string(key) {
	case string(corev1.ResourceCPU):
		if q, err = readQuantity(value); err == nil {
			*cpu = q.MilliValue()
		}
	case string(corev1.ResourceMemory):
		if q, err = readQuantity(value); err == nil {
			*mem = q.Value()
		}
	}
	if err != nil {
		return fmt.Errorf("usage %s: %w", key, err)
	}
	return nil
}

// decodeJSONUsage decodes the next item of a JSON list whole (servers that
// do not speak protobuf) and keeps its usage sample.
func decodeJSONUsage[T any, P interface {
	*T
	metav1.Object
}](sample func(P) policy.Sample) func(*json.Decoder, *usage) error {
	return func(dec *json.Decoder, u *usage) error {
		var it T
		if err := dec.Decode(&it); err != nil {
			return err
		}
		p := P(&it)
		reset(u)
		u.namespace = append(u.namespace, p.GetNamespace()...)
		u.name = append(u.name, p.GetName()...)
		u.sample = sample(p)
		return nil
	}
}

// itemDecoder decodes one list item in either encoding.
type itemDecoder struct {
	protobuf func([]byte, *usage) error
	json     func(*json.Decoder, *usage) error
}

var (
	nodeItems = itemDecoder{protobuf: decodeNodeUsage, json: decodeJSONUsage(NodeSample)}
	podItems  = itemDecoder{protobuf: decodePodUsage, json: decodeJSONUsage(PodSample)}
)

// readQuantity decodes an encoded resource.Quantity as its generated decoder
// does, every occurrence of its string through resource.ParseQuantity, but
// without copying the string out of b first: that copy was two allocations
// per pod and node and period, most of a publisher cycle's allocations
// (docs/benchmarks.md, "Memory and CPU at 5,000 nodes"). ParseQuantity may keep its input in the
// Quantity as its canonical form, so the result can refer to b: read its
// value and let it go.
func readQuantity(b []byte) (q resource.Quantity, err error) {
	err = walk(b, func(num protowire.Number, v []byte) error {
		if num != quantityStringField {
			return nil
		}
		q, err = resource.ParseQuantity(unsafe.String(unsafe.SliceData(v), len(v)))
		return err
	})
	return q, err
}
