package compactlist

import (
	"context"
	"fmt"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// server serves n pods in pages of the limit asked, like kube-apiserver for
// a list at resourceVersion "" (resourceVersion "0" would be one piece), and
// records what each request asked.
type server struct {
	n        int
	requests []metav1.ListOptions
	// largest is the most full Pods one answer held.
	largest int
}

func (s *server) list(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
	s.requests = append(s.requests, o)
	from := 0
	if o.Continue != "" {
		from, _ = strconv.Atoi(o.Continue)
	}
	to := s.n
	if o.Limit > 0 && o.ResourceVersion != "0" {
		to = min(s.n, from+int(o.Limit))
	}
	l := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "100"}}
	for i := from; i < to; i++ {
		l.Items = append(l.Items, corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint("p", i), ResourceVersion: "100"}})
	}
	if to < s.n {
		l.Continue = strconv.Itoa(to)
	}
	s.largest = max(s.largest, len(l.Items))
	return l, nil
}

// record is a converted pod.
type record struct{ metav1.ObjectMeta }

func (r *record) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }
func (r *record) DeepCopyObject() runtime.Object   { c := *r; return &c }

func convert(obj runtime.Object) runtime.Object {
	if p, ok := obj.(*corev1.Pod); ok {
		return &record{metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, ResourceVersion: p.ResourceVersion}}
	}
	return obj
}

func names(t *testing.T, list runtime.Object) []string {
	t.Helper()
	var out []string
	if err := meta.EachListItem(list, func(o runtime.Object) error {
		r, ok := o.(*record)
		if !ok {
			return fmt.Errorf("list item %T, want a record", o)
		}
		out = append(out, r.Name)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestListsArriveConvertedAndInPages(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts metav1.ListOptions
		// wantRV is the resourceVersion the first request asked for.
		wantRV string
	}{
		// The reflector's first list: its pager asks for pages at "0",
		// which the apiserver would answer in one piece.
		{"first list at resourceVersion 0 is read at the current one", metav1.ListOptions{ResourceVersion: "0", Limit: PageSize}, ""},
		// A relist without a limit is paginated here.
		{"a list without a limit is read in pages", metav1.ListOptions{ResourceVersion: "77"}, "77"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &server{n: 1234}
			lw := New(&cache.ListWatch{ListWithContextFunc: s.list}, convert)
			// What the reflector does: client-go's pager over the list func.
			var got []string
			o := tc.opts
			for {
				list, err := lw.ListWithContext(t.Context(), o)
				if err != nil {
					t.Fatal(err)
				}
				got = append(got, names(t, list)...)
				lm, _ := meta.ListAccessor(list)
				if lm.GetResourceVersion() != "100" {
					t.Errorf("list resourceVersion %q, want the server's", lm.GetResourceVersion())
				}
				if lm.GetContinue() == "" {
					break
				}
				o = metav1.ListOptions{Continue: lm.GetContinue(), Limit: o.Limit}
			}
			if len(got) != s.n || got[0] != "p0" || got[len(got)-1] != fmt.Sprint("p", s.n-1) {
				t.Errorf("%d records (%v ... %v), want %d in order", len(got), got[:1], got[len(got)-1:], s.n)
			}
			if s.largest > PageSize {
				t.Errorf("an answer held %d full pods, want at most %d", s.largest, PageSize)
			}
			if s.requests[0].ResourceVersion != tc.wantRV || s.requests[0].Limit != PageSize {
				t.Errorf("first request %+v, want resourceVersion %q and limit %d", s.requests[0], tc.wantRV, PageSize)
			}
		})
	}
}

func TestWatchEventsArriveConvertedExceptErrors(t *testing.T) {
	fw := watch.NewFake()
	lw := New(&cache.ListWatch{WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return fw, nil }}, convert)
	w, err := lw.WatchWithContext(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	status := &metav1.Status{Reason: metav1.StatusReasonExpired}
	go func() {
		fw.Add(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"}})
		fw.Action(watch.Bookmark, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "9"}})
		fw.Error(status)
	}()
	e := <-w.ResultChan()
	if r, ok := e.Object.(*record); !ok || r.Name != "a" || e.Type != watch.Added {
		t.Errorf("first event %s %T, want an ADDED record", e.Type, e.Object)
	}
	e = <-w.ResultChan()
	if r, ok := e.Object.(*record); !ok || r.ResourceVersion != "9" {
		t.Errorf("bookmark %T %+v, want a record carrying resourceVersion 9", e.Object, e.Object)
	}
	e = <-w.ResultChan()
	if e.Type != watch.Error || e.Object != status {
		t.Errorf("error event %s %T, want the Status untouched", e.Type, e.Object)
	}
}
