package kubectlreclaim

import (
	"fmt"
	"slices"
	"strings"
)

// sortKeys are the --sort-by keys of one table besides "name": each returns
// the row's value and whether it has one. Rows sort by value, largest first,
// rows without a value last, ties by name.
type sortKeys[T any] map[string]func(*T) (int64, bool)

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
