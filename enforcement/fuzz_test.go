package enforcement

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// quantities the fuzzer picks from, by byte: absent, zero, small, odd
// spellings, huge and negative values.
var fuzzQuantities = []string{"", "0", "1", "100m", "250m", "1500", "2000", "2", "4Gi", "1Gi", "512Mi", "1000000000", "3.5", "-1", "1e3", "9223372036854775807"}

// specFrom builds a pod spec from fuzz bytes: each container takes 9
// bytes, one per (requests|limits) x (cpu, memory, reclaimed cpu, reclaimed
// memory) plus its kind.
func specFrom(data []byte) *corev1.PodSpec {
	spec := &corev1.PodSpec{}
	resNames := []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, names.CPU, names.Memory}
	for i := 0; i+9 <= len(data) && i < 9*6; i += 9 {
		b := data[i : i+9]
		c := corev1.Container{Name: string(rune('a' + i/9))}
		for j, n := range resNames {
			if q := fuzzQuantities[int(b[j])%len(fuzzQuantities)]; q != "" {
				if c.Resources.Requests == nil {
					c.Resources.Requests = corev1.ResourceList{}
				}
				c.Resources.Requests[n] = resource.MustParse(q)
			}
			if q := fuzzQuantities[int(b[4+j])%len(fuzzQuantities)]; q != "" {
				if c.Resources.Limits == nil {
					c.Resources.Limits = corev1.ResourceList{}
				}
				c.Resources.Limits[n] = resource.MustParse(q)
			}
		}
		if b[8]%2 == 0 {
			spec.Containers = append(spec.Containers, c)
		} else {
			spec.InitContainers = append(spec.InitContainers, c)
		}
	}
	return spec
}

// FuzzEnforce: Enforce twice is Enforce once; Enforced accepts whatever
// Enforce produced; Enforced is nil exactly when Enforce changes nothing and
// does not fail; a refused spec is left as it was.
func FuzzEnforce(f *testing.F) {
	f.Add([]byte{7, 0, 6, 8, 0, 0, 6, 8, 0})
	f.Add([]byte{0, 0, 5, 9, 2, 3, 5, 9, 1, 0, 10, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{3, 10, 13, 14, 5, 11, 13, 15, 0})
	f.Fuzz(func(t *testing.T, data []byte) {
		orig := specFrom(data)
		enforcedErr := Enforced(orig.DeepCopy(), names)
		once := orig.DeepCopy()
		changed, err := Enforce(once, names)
		if (enforcedErr == nil) != (!changed && err == nil) {
			t.Fatalf("Enforced = %v but Enforce = %v, %v", enforcedErr, changed, err)
		}
		if err != nil || !changed {
			if !reflect.DeepEqual(orig, once) {
				t.Fatalf("Enforce = %v, %v but changed the spec", changed, err)
			}
			return
		}
		twice := once.DeepCopy()
		if changed2, err2 := Enforce(twice, names); changed2 || err2 != nil {
			t.Fatalf("second Enforce = %v, %v", changed2, err2)
		}
		if !reflect.DeepEqual(once, twice) {
			t.Fatal("second Enforce changed the spec")
		}
		if err := Enforced(once, names); err != nil {
			t.Fatalf("Enforced after Enforce: %v", err)
		}
	})
}
