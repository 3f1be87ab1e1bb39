package main

import (
	"strings"
	"testing"

	"github.com/kube-reclaim/kube-reclaim/internal/replay"
)

func TestReplayRowsSayWhyWhenTheTraceIsMissing(t *testing.T) {
	rows := replayRows(nil, map[string]string{"replay": "the shared trace is missing (../shared/traces/x): no such file"})
	if len(rows) == 0 {
		t.Fatal("no rows")
	}
	for _, r := range rows {
		if r.Status != statusMissing || !strings.Contains(r.Note, "the shared trace is missing") {
			t.Errorf("row %q: status %s, note %q; want missing with the reason", r.What, r.Status, r.Note)
		}
	}
}

func TestReplayRowsJudgeDominanceByBothMeasures(t *testing.T) {
	res := func(name string, share, rate float64) replay.Result {
		m := replay.ResourceMeasures{ReclaimedShare: share, ViolationRate: rate}
		return replay.Result{Name: name, Cluster: replay.Measures{CPU: m, Memory: m, RegularHarmRate: rate}}
	}
	for _, tc := range []struct {
		name         string
		other        replay.Result
		notDominated bool
	}{
		{"more reclaimed at more violations", res("b", 0.7, 0.02), true},
		{"less reclaimed at fewer violations", res("b", 0.5, 0.001), true},
		{"more reclaimed at fewer violations", res("b", 0.7, 0.001), false},
		{"as much reclaimed at fewer violations", res("b", 0.6, 0.001), false},
		{"the same point", res("b", 0.6, 0.01), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &replayResult{Runs: []*replay.Report{{Results: []replay.Result{res("defaults", 0.6, 0.01), tc.other}}}}
			for _, row := range replayRows(r, nil) {
				if row.ID != "R2" {
					continue
				}
				if pass := row.Status == statusPass; pass != tc.notDominated {
					t.Errorf("%s: %s, want pass=%v", row.What, row.Status, tc.notDominated)
				}
			}
		})
	}
}
