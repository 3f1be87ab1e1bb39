// Package boundedjson decodes JSON from anyone who can reach a port with a
// bound on what the body can make the decoder hold, whatever its size: a
// body of a few bytes per element can stand for a large decoded object
// ("containers":[{},{},...] is three bytes per container), so an array or
// map is refused at its first element past its bound, before that element
// is decoded.
//
// Two ways to decode share its rules: Extension, for json-iterator's struct
// decoding, bounds every struct field tagged maxItems:"N" (the webhook's
// reviews); Items and Rest serve a decoder that walks the body with an
// Iterator itself (the extender's verbs).
package boundedjson

import (
	"errors"
	"fmt"
	"io"
	"reflect"
	"strconv"
	"unsafe"

	jsoniter "github.com/json-iterator/go"
)

// Error is a body with more elements in one array or map than the maxItems
// tag of its field allows.
type Error struct {
	Field string // the JSON name of the array or map
	Max   int
}

func (e *Error) Error() string {
	return fmt.Sprintf("%q has more than %d items, the kube-reclaim webhook's bound for it", e.Field, e.Max)
}

// Items reads the elements of the array at it, calling read with each
// index; read reads the element and returns false to stop. The element
// past limit (none when negative) is not read: past is called instead and
// the array is read no further.
func Items(it *jsoniter.Iterator, limit int, past func(), read func(i int) bool) {
	i := 0
	it.ReadArrayCB(func(it *jsoniter.Iterator) bool {
		if it.Error != nil {
			return false
		}
		if i == limit {
			past()
			return false
		}
		if !read(i) || it.Error != nil {
			return false
		}
		i++
		return true
	})
}

// Rest ends the decode of one value from it: the iterator's error if any,
// else trailing (also left in it) when anything but white space follows
// the value, else nil.
func Rest(it *jsoniter.Iterator, trailing error) error {
	if it.Error != nil {
		return it.Error
	}
	it.WhatIsNext() // sets io.EOF when only white space is left
	switch {
	case it.Error == nil:
		it.Error = trailing
		return trailing
	case errors.Is(it.Error, io.EOF):
		return nil
	}
	return it.Error
}

// NewDecoder makes the decoder of a field of a type a maxItems tag may
// bound (NewSlice, NewMap).
type NewDecoder func(field string, maxItems int) jsoniter.ValDecoder

// Extension replaces the decoder of every struct field tagged maxItems:"N"
// with one that refuses more than N elements; register it on a
// jsoniter.API and decode with Decode. A tag on a type Decoders does not
// hold is a programming error, reported when the decoder of its struct is
// first built.
type Extension struct {
	jsoniter.DummyExtension
	Decoders map[reflect.Type]NewDecoder
}

// UpdateStructDescriptor implements jsoniter.Extension.
func (x *Extension) UpdateStructDescriptor(sd *jsoniter.StructDescriptor) {
	for _, b := range sd.Fields {
		tag, ok := b.Field.Tag().Lookup("maxItems")
		if !ok {
			continue
		}
		n, err := strconv.Atoi(tag)
		newDecoder := x.Decoders[b.Field.Type().Type1()]
		if err != nil || n < 0 || newDecoder == nil || len(b.FromNames) == 0 {
			panic(fmt.Sprintf("boundedjson: field %s of %s: maxItems:%q needs a count and a type of the Extension's Decoders", b.Field.Name(), sd.Type, tag))
		}
		b.Decoder = newDecoder(b.FromNames[0], n)
	}
}

// Decode decodes body into v as api.Unmarshal does, with api's Extension;
// it returns an *Error when an array or map of v is past its bound, and
// trailing when anything but white space follows the value.
func Decode(api jsoniter.API, body []byte, v any, trailing error) error {
	it := api.BorrowIterator(body)
	defer api.ReturnIterator(it)
	it.Attachment = nil
	it.ReadVal(v)
	if be, ok := it.Attachment.(*Error); ok {
		it.Attachment = nil
		return be
	}
	return Rest(it, trailing)
}

// exceeded stops the decode at the first element past the bound. The
// *Error travels in the iterator's Attachment: jsoniter rewrites the error
// of a nested decoder into a string.
func exceeded(it *jsoniter.Iterator, field string, maxItems int) {
	err := &Error{Field: field, Max: maxItems}
	if it.Error == nil {
		it.Attachment = err
	}
	it.ReportError("bounded", err.Error())
}

type boundedSlice[T any] struct {
	field string
	max   int
}

// NewSlice is the NewDecoder of []T.
func NewSlice[T any](field string, maxItems int) jsoniter.ValDecoder {
	return &boundedSlice[T]{field: field, max: maxItems}
}

func (d *boundedSlice[T]) Decode(ptr unsafe.Pointer, it *jsoniter.Iterator) {
	s := (*[]T)(ptr)
	if it.ReadNil() {
		*s = nil
		return
	}
	*s = []T{}
	Items(it, d.max, func() { exceeded(it, d.field, d.max) }, func(int) bool {
		var e T
		it.ReadVal(&e)
		*s = append(*s, e)
		return true
	})
}

type boundedMap[K ~string, V any] struct {
	field string
	max   int
}

// NewMap is the NewDecoder of map[K]V.
func NewMap[K ~string, V any](field string, maxItems int) jsoniter.ValDecoder {
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
