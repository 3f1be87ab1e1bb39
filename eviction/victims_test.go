package eviction

import (
	"slices"
	"testing"
	"time"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

const gi = int64(1) << 30

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// pod builds a candidate created minutesAgo minutes before t0.
func pod(name string, prio int32, minutesAgo int, cpu, mem int64) Candidate {
	return Candidate{Namespace: "batch", Name: name, UID: "uid-" + name, Priority: prio,
		Created: t0.Add(-time.Duration(minutesAgo) * time.Minute), Reclaimed: reclaimable.Resources{CPUMilli: cpu, MemoryBytes: mem}}
}

func leaving(c Candidate) Candidate  { c.Leaving = true; return c }
func excluded(c Candidate) Candidate { c.Excluded = true; return c }

func res(cpu, mem int64) reclaimable.Resources {
	return reclaimable.Resources{CPUMilli: cpu, MemoryBytes: mem}
}

func TestChoose(t *testing.T) {
	cases := []struct {
		name        string
		room        reclaimable.Resources
		pods        []Candidate
		wantVictims []string
		wantHeld    reclaimable.Resources
		wantAfter   reclaimable.Resources
	}{
		{"held within the room evicts nothing", res(4000, 8*gi),
			[]Candidate{pod("a", 0, 1, 2000, gi), pod("b", 0, 2, 2000, gi)}, nil, res(4000, 2*gi), res(4000, 2*gi)},
		{"room zero evicts every reclaimed pod", res(0, 0),
			[]Candidate{pod("a", 0, 1, 1000, gi), pod("b", 10, 2, 1000, gi)}, []string{"a", "b"}, res(2000, 2*gi), res(0, 0)},
		{"the lowest priority goes first even when a higher one is larger", res(3000, 8*gi),
			[]Candidate{pod("big-high", 100, 1, 3000, gi), pod("small-low", 0, 1, 1000, gi)}, []string{"small-low"}, res(4000, 2*gi), res(3000, gi)},
		{"at equal priority the youngest goes first", res(2000, 8*gi),
			[]Candidate{pod("old", 0, 60, 1000, gi), pod("young", 0, 1, 1000, gi), pod("mid", 0, 30, 1000, gi)},
			[]string{"young"}, res(3000, 3*gi), res(2000, 2*gi)},
		{"a younger pod that is not needed once an older one goes is spared", res(1000, 8*gi),
			[]Candidate{pod("young-small", 0, 1, 500, gi), pod("old-big", 0, 60, 3000, gi)},
			[]string{"old-big"}, res(3500, 2*gi), res(500, gi)},
		{"a pod freeing only memory is not chosen when only cpu is over", res(1000, 8*gi),
			[]Candidate{pod("mem-only", 0, 1, 0, 4*gi), pod("cpu", 5, 1, 2000, 0)},
			[]string{"cpu"}, res(2000, 4*gi), res(0, 4*gi)},
		{"memory over: victims free memory, lowest priority first", res(8000, 2*gi),
			[]Candidate{pod("a", 1, 1, 100, 2*gi), pod("b", 2, 1, 100, 2*gi), pod("c", 0, 1, 100, gi)},
			[]string{"c", "a"}, res(300, 5*gi), res(100, 2*gi)},
		{"both over: the victims bring both within the room", res(1000, gi),
			[]Candidate{pod("cpu-heavy", 0, 1, 2000, 0), pod("mem-heavy", 0, 2, 0, 2*gi), pod("both", 9, 3, 500, gi)},
			[]string{"cpu-heavy", "mem-heavy"}, res(2500, 3*gi), res(500, gi)},
		{"pods already leaving count as freed, so nothing more is chosen", res(1000, 8*gi),
			[]Candidate{leaving(pod("going", 9, 1, 2000, gi)), pod("stay", 0, 1, 1000, gi)}, nil, res(3000, 2*gi), res(1000, gi)},
		{"what leaving pods free is counted before choosing more", res(1000, 8*gi),
			[]Candidate{leaving(pod("going", 9, 1, 1000, gi)), pod("a", 0, 1, 1000, gi), pod("b", 0, 2, 1000, gi)},
			[]string{"a"}, res(3000, 3*gi), res(1000, gi)},
		{"an excluded pod is passed over for the next in order", res(1000, 8*gi),
			[]Candidate{excluded(pod("blocked", 0, 1, 1000, gi)), pod("next", 5, 1, 1000, gi)},
			[]string{"next"}, res(2000, 2*gi), res(1000, gi)},
		{"when only excluded pods could free enough, what stays is reported over the room", res(0, 8*gi),
			[]Candidate{excluded(pod("blocked", 0, 1, 3000, gi)), pod("free", 0, 1, 1000, gi)},
			[]string{"free"}, res(4000, 2*gi), res(3000, gi)},
		{"pods without reclaimed requests are never chosen", res(0, 0),
			[]Candidate{pod("zero", 0, 1, 0, 0), pod("a", 0, 1, 1000, 0)}, []string{"a"}, res(1000, 0), res(0, 0)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := Choose(tc.room, tc.pods)
			var got []string
			for _, v := range p.Victims {
				got = append(got, v.Name)
			}
			if !slices.Equal(got, tc.wantVictims) {
				t.Errorf("victims = %v, want %v", got, tc.wantVictims)
			}
			if p.Held != tc.wantHeld {
				t.Errorf("held = %+v, want %+v", p.Held, tc.wantHeld)
			}
			if p.After != tc.wantAfter {
				t.Errorf("after = %+v, want %+v", p.After, tc.wantAfter)
			}
		})
	}
}

func TestChooseDoesNotDependOnTheOrderPodsArriveIn(t *testing.T) {
	pods := []Candidate{pod("c", 0, 1, 1000, 0), pod("a", 0, 1, 1000, 0), pod("b", 0, 1, 1000, 0), pod("d", 1, 1, 1000, 0)}
	want := Choose(res(2000, 0), pods).Victims
	if len(want) != 2 || want[0].Name != "a" || want[1].Name != "b" {
		t.Fatalf("victims among equals = %v, want a then b (by name)", want)
	}
	for i := 0; i < len(pods); i++ {
		rotated := append(append([]Candidate(nil), pods[i:]...), pods[:i]...)
		if got := Choose(res(2000, 0), rotated).Victims; !slices.Equal(got, want) {
			t.Errorf("rotation %d: victims = %v, want %v", i, got, want)
		}
	}
}

// The input slice is the caller's: sorting it in place would reorder the
// publisher's cached view.
func TestChooseLeavesItsInputAlone(t *testing.T) {
	pods := []Candidate{pod("b", 5, 1, 1000, 0), pod("a", 0, 1, 1000, 0)}
	before := slices.Clone(pods)
	Choose(res(0, 0), pods)
	if !slices.Equal(pods, before) {
		t.Errorf("Choose reordered its input: %v", pods)
	}
}
