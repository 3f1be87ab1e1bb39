package webhook

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"unsafe"

	jsoniter "github.com/json-iterator/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Bounded decoding. Anyone who reaches the webhook's port can send a review
// the apiserver never would, and a body of a few bytes per element can
// stand for a large decoded object: "containers":[{},{},...] is three bytes
// per container. So every array and map of a slim object carries a
// maxItems tag, and the decoder stops at the first element past it, before
// decoding that element: what a review can make the webhook hold is bounded
// by the tags, not by the body. The bounds are listed in README.md.

// boundError is a review with more elements in one array or map than its
// maxItems tag allows.
type boundError struct {
	field string // the JSON name of the array or map
	max   int
}

func (e *boundError) Error() string {
	return fmt.Sprintf("%q has more than %d items, the kube-reclaim webhook's bound for it", e.field, e.max)
}

// boundedDecoders makes the decoder of each type a maxItems tag may bound.
// A tag on any other type is a programming error, reported when the
// decoder of its struct is first built.
var boundedDecoders = map[reflect.Type]func(field string, maxItems int) jsoniter.ValDecoder{
	reflect.TypeFor[map[string]string]():      newBoundedMap[string, string],
	reflect.TypeFor[corev1.ResourceList]():    newBoundedMap[corev1.ResourceName, resource.Quantity],
	reflect.TypeFor[[]podContainer]():         newBoundedSlice[podContainer],
	reflect.TypeFor[[]corev1.ResourceClaim](): newBoundedSlice[corev1.ResourceClaim],
}

// boundsExtension replaces the decoder of every struct field tagged
// maxItems:"N" with one that refuses more than N elements.
type boundsExtension struct{ jsoniter.DummyExtension }

func (boundsExtension) UpdateStructDescriptor(sd *jsoniter.StructDescriptor) {
	for _, b := range sd.Fields {
		tag, ok := b.Field.Tag().Lookup("maxItems")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(tag)
		newDecoder := boundedDecoders[b.Field.Type().Type1()]
		if err != nil || n < 0 || newDecoder == nil || len(b.FromNames) == 0 {
			panic(fmt.Sprintf("webhook: field %s of %s: maxItems:%q needs a count and a type of boundedDecoders", b.Field.Name(), sd.Type, tag))
		}
		b.Decoder = newDecoder(b.FromNames[0], n)
	}
}

// exceeded stops the decode at the first element past the bound. The
// boundError travels in the iterator's Attachment: jsoniter rewrites the
// error of a nested decoder into a string.
func exceeded(it *jsoniter.Iterator, field string, maxItems int) {
	err := &boundError{field: field, max: maxItems}
	if it.Error == nil {
		it.Attachment = err
	}
	it.ReportError("bounded", err.Error())
}

type boundedSlice[T any] struct {
	field string
	max   int
}

func newBoundedSlice[T any](field string, maxItems int) jsoniter.ValDecoder {
	return &boundedSlice[T]{field: field, max: maxItems}
}

func (d *boundedSlice[T]) Decode(ptr unsafe.Pointer, it *jsoniter.Iterator) {
	s := (*[]T)(ptr)
	if it.ReadNil() {
		*s = nil
		return
	}
	*s = []T{}
	for it.ReadArray() && it.Error == nil {
		if len(*s) == d.max {
			exceeded(it, d.field, d.max)
			return
		}
		var e T
		it.ReadVal(&e)
		*s = append(*s, e)
	}
}

type boundedMap[K ~string, V any] struct {
	field string
	max   int
}

func newBoundedMap[K ~string, V any](field string, maxItems int) jsoniter.ValDecoder {
	return &boundedMap[K, V]{field: field, max: maxItems}
}

func (d *boundedMap[K, V]) Decode(ptr unsafe.Pointer, it *jsoniter.Iterator) {
	m := (*map[K]V)(ptr)
	if it.ReadNil() {
		*m = nil
		return
	}
	if *m == nil {
		*m = map[K]V{}
	}
	n := 0
	it.ReadMapCB(func(it *jsoniter.Iterator, key string) bool {
		if n == d.max {
			exceeded(it, d.field, d.max)
			return false
		}
		n++
		var v V
		if s, ok := any(&v).(*string); ok {
			*s = it.ReadString()
		} else {
			it.ReadVal(&v)
		}
		(*m)[K(key)] = v
		return it.Error == nil
	})
}

// decodeReview decodes body into v as reviewJSON.Unmarshal does, and
// returns a *boundError when an array or map of v is past its bound.
func decodeReview(body []byte, v any) error {
	it := reviewJSON.BorrowIterator(body)
	defer reviewJSON.ReturnIterator(it)
	it.Attachment = nil
	it.ReadVal(v)
	if be, ok := it.Attachment.(*boundError); ok {
		it.Attachment = nil
		return be
	}
	if it.Error != nil && !errors.Is(it.Error, io.EOF) {
		return it.Error
	}
	// Only white space may follow the review (what Unmarshal checks).
	if it.WhatIsNext(); it.Error == nil {
		return errors.New("bytes left after the review")
	}
	if !errors.Is(it.Error, io.EOF) {
		return it.Error
	}
	return nil
}

// skipped is a JSON value that is checked and passed over without being
// copied (see reviewJSON).
type skipped struct{}
