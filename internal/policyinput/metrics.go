package policyinput

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"

	"google.golang.org/protobuf/encoding/protowire"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
)

// ReadNodeMetrics lists NodeMetrics once (selected by opts) and adds every
// item to the history; it returns how many samples were new.
func (a *Assembler) ReadNodeMetrics(ctx context.Context, mc metricsclient.Interface, opts metav1.ListOptions) (int, error) {
	v1 := mc.MetricsV1beta1()
	if rc, ok := v1.RESTClient().(*rest.RESTClient); ok && rc != nil {
		added := 0
		err := stream(ctx, rc.Get().Resource("nodes").VersionedParams(&opts, metav1.ParameterCodec), nodeItems, func(u *usage) {
			if a.hist.AddNode(string(u.name), u.sample) {
				added++
			}
		})
		return added, err
	}
	list, err := v1.NodeMetricses().List(ctx, opts)
	if err != nil {
		return 0, err
	}
	return a.AddNodeMetrics(list.Items), nil
}

// ReadPodMetrics lists the PodMetrics of every namespace once and adds every
// item to the history; it returns how many samples were new.
//
// metrics.k8s.io does not page lists, and at 150,000 pods a decoded
// PodMetricsList and its body are a few hundred MB held at once every
// period for a few numbers per pod. So the response is read as it
// arrives and only the usage sample of each item is decoded (see readList
// and decodePodUsage). Clients without a REST transport (the clientset's
// fakes) are listed as usual.
func (a *Assembler) ReadPodMetrics(ctx context.Context, mc metricsclient.Interface) (int, error) {
	v1 := mc.MetricsV1beta1()
	if rc, ok := v1.RESTClient().(*rest.RESTClient); ok && rc != nil {
		added := 0
		err := stream(ctx, rc.Get().Resource("pods"), podItems, func(u *usage) {
			a.key = appendPodKey(a.key[:0], u.namespace, u.name)
			if a.hist.AddPod(a.key, u.sample) {
				added++
			}
		})
		return added, err
	}
	list, err := v1.PodMetricses(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	return a.AddPodMetrics(list.Items), nil
}

// stream sends req and reads the list it answers item by item.
func stream(ctx context.Context, req *rest.Request, dec itemDecoder, each func(*usage)) error {
	body, err := req.Stream(ctx)
	if err != nil {
		return err
	}
	defer body.Close()
	return readList(body, dec, each)
}

// protobufPrefix starts every protobuf body of the Kubernetes API; a
// runtime.Unknown follows, whose field 2 holds the encoded list.
var protobufPrefix = []byte("k8s\x00")

const (
	unknownRawField = 2 // runtime.Unknown.Raw
	listItemsField  = 2 // NodeMetricsList.Items, PodMetricsList.Items (1 is ListMeta)
	// maxItemBytes bounds one encoded item: a PodMetrics of a pod with
	// hundreds of containers and labels is tens of kilobytes.
	maxItemBytes = 16 << 20
)

// readList reads a NodeMetricsList or PodMetricsList body and passes the
// usage of each item to each as soon as it is decoded, reusing one usage. A
// protobuf body is read field by field: its only parts held at once are a
// buffered window and the encoded item. A JSON body (from servers that do
// not speak protobuf) is decoded item by item by encoding/json.
func readList(body io.Reader, dec itemDecoder, each func(*usage)) error {
	br := bufio.NewReaderSize(body, 64<<10)
	if prefix, _ := br.Peek(len(protobufPrefix)); !bytes.Equal(prefix, protobufPrefix) {
		return readJSONList(json.NewDecoder(br), dec.json, each)
	}
	_, _ = br.Discard(len(protobufPrefix))
	w := &wireReader{r: br, left: math.MaxInt64}
	for {
		num, size, err := w.field()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("metrics list: %w", err)
		}
		if num != unknownRawField {
			if err := w.skip(size); err != nil {
				return fmt.Errorf("metrics list: %w", err)
			}
			continue
		}
		if err := readProtobufItems(&wireReader{r: br, left: size}, dec.protobuf, each); err != nil {
			return fmt.Errorf("metrics list: %w", err)
		}
		w.left -= size
	}
}

// readProtobufItems reads the fields of an encoded list from w and passes
// the usage of every item to each.
func readProtobufItems(w *wireReader, decode func([]byte, *usage) error, each func(*usage)) error {
	var (
		buf []byte
		u   usage
	)
	for w.left > 0 {
		num, size, err := w.field()
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF // the list promised more
		}
		if err != nil {
			return err
		}
		if num != listItemsField {
			if err := w.skip(size); err != nil {
				return err
			}
			continue
		}
		if size > maxItemBytes {
			return fmt.Errorf("an item of %d bytes (at most %d)", size, maxItemBytes)
		}
		buf = slices.Grow(buf[:0], int(size))[:size]
		if err := w.read(buf); err != nil {
			return err
		}
		if err := decode(buf, &u); err != nil {
			return fmt.Errorf("item: %w", err)
		}
		each(&u)
	}
	return nil
}

// wireReader reads protobuf fields from a stream, at most left bytes. Both
// messages it reads (runtime.Unknown and the metrics lists) hold only
// length-delimited fields.
type wireReader struct {
	r    *bufio.Reader
	left int64
}

func (w *wireReader) ReadByte() (byte, error) {
	if w.left <= 0 {
		return 0, io.ErrUnexpectedEOF
	}
	b, err := w.r.ReadByte()
	if err == nil {
		w.left--
	}
	return b, err
}

// field reads a field's tag and length; io.EOF means the stream ended
// cleanly between fields.
func (w *wireReader) field() (protowire.Number, int64, error) {
	tag, err := binary.ReadUvarint(w)
	if err != nil {
		return 0, 0, err
	}
	num, typ := protowire.DecodeTag(tag)
	if typ != protowire.BytesType {
		return 0, 0, fmt.Errorf("field %d has wire type %d, not length-delimited", num, typ)
	}
	size, err := binary.ReadUvarint(w)
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return 0, 0, err
	}
	if size > uint64(w.left) {
		return 0, 0, fmt.Errorf("field %d claims %d bytes, %d left: %w", num, size, w.left, io.ErrUnexpectedEOF)
	}
	return num, int64(size), nil
}

func (w *wireReader) skip(n int64) error {
	d, err := w.r.Discard(int(n))
	w.left -= int64(d)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

func (w *wireReader) read(p []byte) error {
	n, err := io.ReadFull(w.r, p)
	w.left -= int64(n)
	if err == io.EOF {
		err = io.ErrUnexpectedEOF
	}
	return err
}

// readJSONList decodes {"items": [...], ...} one item at a time.
func readJSONList(dec *json.Decoder, decode func(*json.Decoder, *usage) error, each func(*usage)) error {
	if err := expectDelim(dec, '{'); err != nil {
		return err
	}
	for dec.More() {
		key, err := dec.Token()
		if err != nil {
			return fmt.Errorf("metrics list: %w", err)
		}
		if key != "items" {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return fmt.Errorf("metrics list: %w", err)
			}
			continue
		}
		if err := expectDelim(dec, '['); err != nil {
			return err
		}
		var u usage
		for dec.More() {
			if err := decode(dec, &u); err != nil {
				return fmt.Errorf("metrics list item: %w", err)
			}
			each(&u)
		}
		if err := expectDelim(dec, ']'); err != nil {
			return err
		}
	}
	return expectDelim(dec, '}')
}

func expectDelim(dec *json.Decoder, want json.Delim) error {
	tok, err := dec.Token()
	if err != nil {
		return fmt.Errorf("metrics list: %w", err)
	}
	if tok != want {
		return fmt.Errorf("metrics list: %v where %v belongs", tok, want)
	}
	return nil
}
