package reclaimable

import (
	"strings"
	"testing"
	"time"
)

// FuzzParse feeds Parse and Judge arbitrary annotation values: neither may
// panic, an accepted value holds no negative amount and has a writeTime, a
// fresh verdict carries exactly the annotated values, and an accepted value
// re-marshals to a value that parses back to the same encoding.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		`{"cpu":2500,"memory":6442450944,"policy":"usage","metricsTime":"2026-03-01T11:58:30Z","writeTime":"2026-03-01T11:59:00Z"}`,
		`{"cpu":1,"memory":2,"held":{"cpuMilli":3,"memoryBytes":4},"policy":"usage","pool":"batch","writeTime":"2026-03-01T11:59:00+02:00"}`,
		`{"cpu":0,"memory":0,"policy":"usage","zeroReason":"metrics-stale","writeTime":"2026-03-01T11:59:00Z",` +
			`"explanation":{"cpu":{"terms":[{"name":"allocatable","value":3800,"op":"="},{"name":"margin","value":380,"note":"10%","op":"-"}],"result":3420},` +
			`"memory":{"terms":[],"result":0}}}`,
		`{"cpu":-1,"memory":2,"writeTime":"2026-03-01T11:59:00Z"}`,
		`{"cpu":1,"memory":2,"held":{"cpuMilli":-3},"writeTime":"2026-03-01T11:59:00Z"}`,
		`{"cpu":1,"memory":2}`,
		`{"cpu":9223372036854775808,"memory":2,"writeTime":"2026-03-01T11:59:00Z"}`,
		`{"cpu":"1","memory":2,"writeTime":"2026-03-01T11:59:00Z"}`,
		`{"cpu":1,"memory":2,"writeTime":"9999-12-31T23:59:59-23:59"}`,
		`{"cpu":1,"memory":2,"explanation":{"cpu":"not an object"},"writeTime":"2026-03-01T11:59:00Z"}`,
		`{"cpu":1,"cpu":2,"memory":2,"writeTime":"2026-03-01T11:59:00Z"}`,
		`null`, `[]`, `"x"`, `{`, ``, `not json`,
	} {
		f.Add(seed)
	}
	now := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, value string) {
		a, err := Parse(value)
		for _, alive := range []bool{true, false} {
			fr := Judge(value, true, now, DefaultStaleAfter, alive)
			if (err == nil) != (fr.Annotation != nil) || (err != nil && fr.Reason != ReasonMalformed) {
				t.Fatalf("Parse error %v but Judge %+v", err, fr)
			}
			if fr.Fresh && (fr.Room != a.Room() || fr.Held != a.HeldOrZero() || fr.Reason != "") {
				t.Fatalf("fresh verdict %+v for %+v", fr, a)
			}
		}
		if err != nil {
			if a != (Annotation{}) {
				t.Fatalf("Parse failed (%v) but returned %+v", err, a)
			}
			return
		}
		if a.CPUMilli < 0 || a.MemoryBytes < 0 || a.HeldOrZero().CPUMilli < 0 || a.HeldOrZero().MemoryBytes < 0 || a.WriteTime.IsZero() {
			t.Fatalf("accepted %q as %+v", value, a)
		}
		first, err := a.Marshal()
		if err != nil {
			// A time whose year leaves [0, 9999] in its own zone cannot be
			// written back; only round trips that can happen are checked.
			if strings.Contains(err.Error(), "year") {
				return
			}
			t.Fatalf("Marshal of %+v: %v", a, err)
		}
		b, err := Parse(first)
		if err != nil {
			t.Fatalf("re-parsing %s: %v", first, err)
		}
		if !b.WriteTime.Equal(a.WriteTime) || b.Room() != a.Room() || b.HeldOrZero() != a.HeldOrZero() {
			t.Fatalf("round trip changed %+v into %+v", a, b)
		}
		second, err := b.Marshal()
		if err != nil || second != first {
			t.Fatalf("marshalling is not stable: %s then %s (%v)", first, second, err)
		}
	})
}
