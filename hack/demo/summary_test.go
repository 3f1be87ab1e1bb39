package main

import (
	"strings"
	"testing"
)

const gi = int64(1) << 30

func node(name string, pubCPU, pubMem, reqCPU, reqMem int64, pods ...string) nodeRow {
	return nodeRow{name: name, pubCPU: pubCPU, pubMem: pubMem, reqCPU: reqCPU, reqMem: reqMem, batch: len(pods), batchPods: pods}
}

func TestSummarizeClaimsOnlyWhatTheFiguresShow(t *testing.T) {
	fits := node("node-2", 6000, 20*gi, 4000, 8*gi, "wave1-02", "wave2-00")
	for _, tc := range []struct {
		name                      string
		afterWave1, before2, last []nodeRow
		want, notWant             []string
		overbooked                int
	}{{
		name:       "every node within its room: the sentence is printed",
		afterWave1: []nodeRow{node("node-2", 6000, 20*gi, 2000, 4*gi, "wave1-02")},
		before2:    []nodeRow{node("node-2", 6000, 20*gi, 2000, 4*gi, "wave1-02")},
		last:       []nodeRow{fits},
		want:       []string{"no node holds more reclaimed requests than its published room"},
	}, {
		name: "room shrank to zero under two nodes' wave-1 pods: both listed with both figures, no sentence",
		afterWave1: []nodeRow{node("node-0", 9600, 20*gi, 4000, 8*gi, "wave1-00", "wave1-10"),
			node("node-1", 7600, 30*gi, 4000, 8*gi, "wave1-01", "wave1-11"), node("node-2", 6000, 20*gi, 2000, 4*gi, "wave1-02")},
		before2: []nodeRow{node("node-0", 0, 20*gi, 4000, 8*gi, "wave1-00", "wave1-10"),
			node("node-1", 0, 4*gi, 4000, 8*gi, "wave1-01", "wave1-11"), node("node-2", 6000, 20*gi, 2000, 4*gi, "wave1-02")},
		last: []nodeRow{node("node-0", 0, 20*gi, 4000, 8*gi, "wave1-00", "wave1-10"),
			node("node-1", 0, 4*gi, 4000, 8*gi, "wave1-01", "wave1-11"), fits},
		want: []string{"2 of 3 nodes hold more reclaimed requests than their published room",
			"node-0: holds 4000m CPU / 8.0Gi, room 0m / 20.0Gi; room after wave 1 was 9600m / 20.0Gi; no wave-2 pod went there",
			"node-1: holds 4000m CPU / 8.0Gi, room 0m / 4.0Gi; room after wave 1 was 7600m / 30.0Gi"},
		notWant: []string{"no node holds more", "node-2"},
	}, {
		name:       "memory alone over the room counts",
		afterWave1: []nodeRow{node("node-0", 8000, 20*gi, 2000, 4*gi, "wave1-00")},
		before2:    []nodeRow{node("node-0", 8000, 2*gi, 2000, 4*gi, "wave1-00")},
		last:       []nodeRow{node("node-0", 8000, 2*gi, 2000, 4*gi, "wave1-00")},
		want:       []string{"1 of 1 nodes", "node-0: holds 2000m CPU / 4.0Gi, room 8000m / 2.0Gi"},
		notWant:    []string{"no node holds more"},
	}, {
		name:       "a stale node says why its room is zero",
		afterWave1: []nodeRow{node("node-0", 8000, 20*gi, 2000, 4*gi, "wave1-00")},
		last:       []nodeRow{{name: "node-0", reqCPU: 2000, reqMem: 4 * gi, stale: "annotation-too-old", batchPods: []string{"wave1-00"}}},
		want:       []string{"room 0m / 0.0Gi (annotation-too-old)"},
	}, {
		name:       "wave-2 pods on a node whose unchanged room they exceed: over-booked",
		afterWave1: []nodeRow{node("node-0", 4000, 20*gi, 2000, 4*gi, "wave1-00")},
		before2:    []nodeRow{node("node-0", 4000, 20*gi, 2000, 4*gi, "wave1-00")},
		last:       []nodeRow{node("node-0", 4000, 20*gi, 6000, 12*gi, "wave1-00", "wave2-03", "wave2-07")},
		want:       []string{"took 2 wave-2 pods although its room did not change"},
		overbooked: 1,
	}, {
		name:       "wave-2 pods on a node whose room changed during the wave: listed, not judged",
		afterWave1: []nodeRow{node("node-0", 8000, 20*gi, 2000, 4*gi, "wave1-00")},
		before2:    []nodeRow{node("node-0", 8000, 20*gi, 2000, 4*gi, "wave1-00")},
		last:       []nodeRow{node("node-0", 3000, 20*gi, 4000, 8*gi, "wave1-00", "wave2-03")},
		want:       []string{"took 1 wave-2 pod while its room changed (before wave 2: 8000m / 20.0Gi)"},
	}, {
		name:       "a node over its room right after wave 1: over-booked, even if it fits at the end",
		afterWave1: []nodeRow{node("node-0", 1000, 20*gi, 2000, 4*gi, "wave1-00")},
		before2:    []nodeRow{node("node-0", 4000, 20*gi, 2000, 4*gi, "wave1-00")},
		last:       []nodeRow{node("node-0", 4000, 20*gi, 2000, 4*gi, "wave1-00")},
		want:       []string{"no node holds more reclaimed requests than its published room"},
		overbooked: 1,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			lines, overbooked := summarize(tc.afterWave1, tc.before2, tc.last)
			out := strings.Join(lines, "\n")
			t.Log("\n" + out)
			for _, w := range tc.want {
				if !strings.Contains(out, w) {
					t.Errorf("missing %q", w)
				}
			}
			for _, w := range tc.notWant {
				if strings.Contains(out, w) {
					t.Errorf("unexpected %q", w)
				}
			}
			if len(overbooked) != tc.overbooked {
				t.Errorf("overbooked = %q, want %d entries", overbooked, tc.overbooked)
			}
		})
	}
}
