// Package compactlist feeds client-go informers a compact record of every
// object instead of the object, converting each list page as it arrives.
//
// An informer's transform runs only after the reflector has gathered the
// whole initial list: at 150,000 pods that is every Pod decoded at once, a
// start-up peak of gigabytes for a component that keeps a few numbers per
// pod. Converting inside the ListerWatcher, page by page, bounds the peak to
// one page of full objects plus the records.
package compactlist

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/pager"
)

// PageSize is how many objects one list request returns: the most full
// objects held at once while listing.
const PageSize = 500

// Convert turns an object read from the API into the record the informer
// stores. The record must be a runtime.Object that client-go's stores can
// key (meta.Accessor) and must keep the object's resourceVersion, which the
// reflector reads from watch bookmarks.
type Convert func(runtime.Object) runtime.Object

// New wraps lw so that lists are read in pages and every listed or watched
// object reaches the informer converted. The informer's example object must
// be of the record's type.
func New(lw cache.ListerWatcherWithContext, convert Convert) *cache.ListWatch {
	page := func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
		// The reflector's first list asks for resourceVersion "0", which
		// kube-apiserver serves from its watch cache in one piece whatever
		// the limit; a list at the current resourceVersion ("") is
		// paginated instead, for one consistent read at start-up.
		if o.ResourceVersion == "0" && o.Continue == "" {
			o.ResourceVersion, o.ResourceVersionMatch = "", ""
		}
		obj, err := lw.ListWithContext(ctx, o)
		if err != nil {
			return nil, err
		}
		lm, err := meta.ListAccessor(obj)
		if err != nil {
			return nil, err
		}
		out := &metav1.List{ListMeta: metav1.ListMeta{ResourceVersion: lm.GetResourceVersion(),
			Continue: lm.GetContinue(), RemainingItemCount: lm.GetRemainingItemCount()}}
		out.Items = make([]runtime.RawExtension, 0, meta.LenList(obj))
		err = meta.EachListItem(obj, func(item runtime.Object) error {
			out.Items = append(out.Items, runtime.RawExtension{Object: convert(item)})
			return nil
		})
		return out, err
	}
	return &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			if o.Limit > 0 || o.Continue != "" {
				// The reflector pages the list itself.
				return page(ctx, o)
			}
			// The reflector asks for everything in one answer (a relist at a
			// resourceVersion it knows, or its fallback after an expired
			// page): read it in pages here. An expired page is an error, and
			// the reflector lists again.
			p := pager.New(page)
			p.PageSize, p.FullListIfExpired = PageSize, false
			list, _, err := p.ListWithAlloc(ctx, o)
			return list, err
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			w, err := lw.WatchWithContext(ctx, o)
			if err != nil {
				return nil, err
			}
			return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
				if e.Type != watch.Error {
					e.Object = convert(e.Object)
				}
				return e, true
			}), nil
		},
	}
}
