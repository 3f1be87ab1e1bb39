package main

import (
	"fmt"
	"strings"
)

// wave2Prefix names the pods of the second wave (see demo.wave).
const wave2Prefix = "wave2-"

// holdsMore reports whether the node's reclaimed pods hold more than the room
// it publishes now, in either resource.
func holdsMore(r nodeRow) bool { return r.reqCPU > r.pubCPU || r.reqMem > r.pubMem }

func heldAndRoom(r nodeRow) string {
	s := fmt.Sprintf("holds %dm CPU / %s, room %dm / %s", r.reqCPU, gib(r.reqMem), r.pubCPU, gib(r.pubMem))
	if r.stale != "" {
		s += " (" + r.stale + ")"
	}
	return s
}

// byName indexes rows by node name.
func byName(rows []nodeRow) map[string]nodeRow {
	m := make(map[string]nodeRow, len(rows))
	for _, r := range rows {
		m[r.name] = r
	}
	return m
}

func room(r nodeRow) string { return fmt.Sprintf("%dm / %s", r.pubCPU, gib(r.pubMem)) }

func wave2Pods(r nodeRow) int {
	n := 0
	for _, p := range r.batchPods {
		if strings.HasPrefix(p, wave2Prefix) {
			n++
		}
	}
	return n
}

func wave2Count(n int) string {
	if n == 1 {
		return "1 wave-2 pod"
	}
	return fmt.Sprintf("%d wave-2 pods", n)
}

// summarize turns three snapshots of the nodes (after wave 1, after the usage
// change just before wave 2, after wave 2) into the demo's closing lines.
// Every claim is computed from them: a node whose reclaimed pods hold more
// than its published room is listed with both figures, and the sentence that
// no node holds more is printed only when that is true.
//
// overbooked lists what the extender must never do, placing beyond the room:
// a node holding more than its room right after wave 1 (usage did not change
// between those binds and the snapshot), or a node that took wave-2 pods and
// holds more than a room that did not change during wave 2. A node whose room
// shrank under pods already running is not over-booked: the extender places
// nothing more there, and the publisher evicts none for that alone (only
// on memory pressure).
func summarize(afterWave1, beforeWave2, final []nodeRow) (lines, overbooked []string) {
	w1, b2 := byName(afterWave1), byName(beforeWave2)
	for _, r := range afterWave1 {
		if holdsMore(r) {
			overbooked = append(overbooked, fmt.Sprintf("%s after wave 1 %s", r.name, heldAndRoom(r)))
		}
	}
	var over []string
	for _, r := range final {
		if !holdsMore(r) {
			continue
		}
		line := fmt.Sprintf("    %s: %s", r.name, heldAndRoom(r))
		late := wave2Pods(r)
		prev, seen := b2[r.name]
		switch {
		case late == 0:
			if w, ok := w1[r.name]; ok {
				line += "; room after wave 1 was " + room(w)
			}
			line += "; no wave-2 pod went there"
		case seen && prev.pubCPU == r.pubCPU && prev.pubMem == r.pubMem:
			line += fmt.Sprintf("; took %s although its room did not change", wave2Count(late))
			overbooked = append(overbooked, fmt.Sprintf("%s %s with %s", r.name, heldAndRoom(r), wave2Count(late)))
		case seen:
			line += fmt.Sprintf("; took %s while its room changed (before wave 2: %s)", wave2Count(late), room(prev))
		default:
			line += fmt.Sprintf("; took %s", wave2Count(late))
		}
		over = append(over, line)
	}
	if len(over) == 0 {
		return []string{"no node holds more reclaimed requests than its published room"}, overbooked
	}
	lines = append(lines, fmt.Sprintf("%d of %d nodes hold more reclaimed requests than their published room; "+
		"the extender places nothing more there, and nothing is evicted for it: the publisher evicts on memory pressure only (see docs/design.md#eviction):", len(over), len(final)))
	return append(lines, over...), overbooked
}
