package kubectlreclaim

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// sortKeys are the --sort-by keys of one table besides "name": each returns
// the row's value and whether it has one. Rows sort by value, largest first,
// rows without a value last, ties by name.
type sortKeys[T any] map[string]func(*T) (int64, bool)

// resourceKeys are the keys prefix-cpu and prefix-memory, read from the
// Resources get returns for a row (nil: the row has no value).
func resourceKeys[T any](prefix string, get func(*T) *reclaimable.Resources) sortKeys[T] {
	read := func(of func(reclaimable.Resources) int64) func(*T) (int64, bool) {
		return func(row *T) (int64, bool) {
			if v := get(row); v != nil {
				return of(*v), true
			}
			return 0, false
		}
	}
	return sortKeys[T]{
		prefix + "-cpu":    read(func(v reclaimable.Resources) int64 { return v.CPUMilli }),
		prefix + "-memory": read(func(v reclaimable.Resources) int64 { return v.MemoryBytes }),
	}
}

// joinKeys is one table of the keys of every table given.
func joinKeys[T any](tables ...sortKeys[T]) sortKeys[T] {
	all := sortKeys[T]{}
	for _, t := range tables {
		maps.Copy(all, t)
	}
	return all
}

// names lists the keys for --help and errors, "name" first.
func (k sortKeys[T]) names() []string {
	keys := []string{"name"}
	for key := range k {
		keys = append(keys, key)
	}
	slices.Sort(keys[1:])
	return keys
}

// validate reports a key that is not one of the table's.
func (k sortKeys[T]) validate(key string) error {
	if key == "" || key == "name" || k[key] != nil {
		return nil
	}
	return fmt.Errorf("--sort-by: %q is not one of %s", key, strings.Join(k.names(), ", "))
}

// sort orders rows by key; "" means name.
func (k sortKeys[T]) sort(rows []T, key string, name func(*T) string) error {
	if err := k.validate(key); err != nil {
		return err
	}
	byName := func(a, b *T) int { return strings.Compare(name(a), name(b)) }
	get := k[key]
	slices.SortStableFunc(rows, func(a, b T) int {
		if get == nil {
			return byName(&a, &b)
		}
		va, oka := get(&a)
		vb, okb := get(&b)
		switch {
		case oka != okb:
			if oka {
				return -1
			}
			return 1
		case va > vb:
			return -1
		case va < vb:
			return 1
		}
		return byName(&a, &b)
	})
	return nil
}
