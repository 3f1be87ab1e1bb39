package kubectlreclaim

import (
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
)

// fill sets every settable field reachable from v: pointers allocated,
// slices of two elements, non-zero scalars. Structs with unexported fields
// only (time.Time) are left as they are: they are values.
func fill(v reflect.Value, n *int64) {
	*n++
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		fill(v.Elem(), n)
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i), n)
			}
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range 2 {
			fill(v.Index(i), n)
		}
	case reflect.String:
		v.SetString("s")
	case reflect.Int, reflect.Int64:
		v.SetInt(*n)
	case reflect.Bool:
		v.SetBool(true)
	}
}

// shared reports the first pointer or slice array a and b have in common.
func shared(a, b reflect.Value, path string) string {
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return ""
		}
		if a.Pointer() == b.Pointer() {
			return path
		}
		return shared(a.Elem(), b.Elem(), path)
	case reflect.Struct:
		for i := range a.NumField() {
			if a.Type().Field(i).IsExported() {
				if p := shared(a.Field(i), b.Field(i), path+"."+a.Type().Field(i).Name); p != "" {
					return p
				}
			}
		}
	case reflect.Slice:
		if a.Len() > 0 && b.Len() > 0 && a.Pointer() == b.Pointer() {
			return path
		}
		for i := range min(a.Len(), b.Len()) {
			if p := shared(a.Index(i), b.Index(i), path+"[]"); p != "" {
				return p
			}
		}
	}
	return ""
}

func TestDeepCopiesShareNothing(t *testing.T) {
	for _, obj := range []runtime.Object{&NodeList{}, &PodList{}, &ExplainReport{}, &PodExplainReport{}, &DoctorReport{}} {
		t.Run(reflect.TypeOf(obj).Elem().Name(), func(t *testing.T) {
			var n int64
			fill(reflect.ValueOf(obj).Elem(), &n)
			c := obj.DeepCopyObject()
			if !reflect.DeepEqual(c, obj) {
				t.Fatalf("copy differs:\n%+v\n%+v", c, obj)
			}
			if p := shared(reflect.ValueOf(obj), reflect.ValueOf(c), ""); p != "" {
				t.Errorf("the copy shares %s with the original", p)
			}
		})
	}
	// Positive control: a shallow copy is caught.
	var l NodeList
	var n int64
	fill(reflect.ValueOf(&l).Elem(), &n)
	shallow := l
	if shared(reflect.ValueOf(&l).Elem(), reflect.ValueOf(&shallow).Elem(), "") == "" {
		t.Error("shared does not see a shallow copy")
	}
}
