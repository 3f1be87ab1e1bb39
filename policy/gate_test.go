package policy

import (
	"testing"
	"time"
)

func TestShouldPublish(t *testing.T) {
	prev := func(cpu, mem int64, writtenAgo time.Duration) *Published {
		return &Published{Values: Resources{CPUMilli: cpu, MemoryBytes: mem}, WriteTime: now.Add(-writtenAgo)}
	}
	vals := func(cpu, mem int64) Resources { return Resources{CPUMilli: cpu, MemoryBytes: mem} }
	const refresh = 5 * time.Minute
	cases := []struct {
		name      string
		prev      *Published
		next      Resources
		threshold float64
		want      string // "" means no publish
	}{
		{"the first publish is initial", nil, vals(0, 0), 0.1, PublishInitial},
		{"the first publish is initial even with values", nil, vals(1000, 2000), 0.1, PublishInitial},
		{"unchanged fresh values are not republished", prev(1000, 2000, time.Minute), vals(1000, 2000), 0.1, ""},
		{"a decrease of one millicore is republished", prev(1000, 2000, time.Minute), vals(999, 2000), 0.1, PublishDecreased},
		{"a decrease of one byte is republished", prev(1000, 2000, time.Minute), vals(1000, 1999), 0.1, PublishDecreased},
		{"a decrease to zero is republished", prev(1000, 2000, time.Minute), vals(0, 0), 0.1, PublishDecreased},
		{"a decrease wins over a large increase of the other resource", prev(1000, 2000, time.Minute), vals(5000, 1999), 0.1, PublishDecreased},
		{"an increase of exactly the threshold is not republished", prev(1000, 2000, time.Minute), vals(1100, 2200), 0.1, ""},
		{"an increase just above the threshold is republished", prev(1000, 2000, time.Minute), vals(1101, 2000), 0.1, PublishChanged},
		{"a memory increase above the threshold is republished", prev(1000, 2000, time.Minute), vals(1000, 2201), 0.1, PublishChanged},
		{"an increase from zero is republished", prev(0, 2000, time.Minute), vals(1, 2000), 0.1, PublishChanged},
		{"a zero threshold republishes any increase", prev(1000, 2000, time.Minute), vals(1001, 2000), 0, PublishChanged},
		{"a threshold of 50 percent ignores a 40 percent increase", prev(1000, 2000, time.Minute), vals(1400, 2800), 0.5, ""},
		{"a threshold above 100 percent needs more than doubling", prev(1000, 2000, time.Minute), vals(2000, 2000), 1.5, ""},
		{"a huge memory increase is compared without overflow",
			prev(1000, 1<<40, time.Minute), vals(1000, (1<<40)+(1<<40)/10+1), 0.1, PublishChanged},
		{"a huge memory increase at the threshold is compared without overflow",
			prev(1000, 10<<40, time.Minute), vals(1000, (10<<40)+(1<<40)), 0.1, ""},
		{"a write exactly as old as the refresh interval is not refreshed", prev(1000, 2000, refresh), vals(1000, 2000), 0.1, ""},
		{"a write older than the refresh interval is refreshed", prev(1000, 2000, refresh+time.Second), vals(1000, 2000), 0.1, PublishRefresh},
		{"an old write of zero values is refreshed", prev(0, 0, time.Hour), vals(0, 0), 0.1, PublishRefresh},
		{"a small increase on an old write is a refresh", prev(1000, 2000, time.Hour), vals(1050, 2000), 0.1, PublishRefresh},
		{"a write slightly in the future is not refreshed", prev(1000, 2000, -time.Minute), vals(1000, 2000), 0.1, ""},
		{"a write far in the future is refreshed", prev(1000, 2000, -refresh-time.Second), vals(1000, 2000), 0.1, PublishRefresh},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ok, reason := ShouldPublish(tc.prev, tc.next, now, tc.threshold, refresh)
			if ok != (tc.want != "") || reason != tc.want {
				t.Errorf("ShouldPublish = %v, %q; want %q", ok, reason, tc.want)
			}
		})
	}
}
