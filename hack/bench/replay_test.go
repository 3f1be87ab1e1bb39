package main

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
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

func TestRoomDipFiguresReadTheRecordedRows(t *testing.T) {
	doc := "text\n\n| controller | commit | jobs | evictions per 100 pod-h |\n| --- | --- | --- | --- |\n" +
		"| room-dip | `d477592` | 1h | 7.97 |\n| room-dip | `d477592` | 8h | 15.9 |\n| pressure | x | 1h | 0.06 |\n"
	got, err := roomDipFigures(doc)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]roomDipFigure{"1h": {Evictions: 7.97, Commit: "d477592"}, "8h": {Evictions: 15.9, Commit: "d477592"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("room-dip figures %v, want %v", got, want)
	}
	if _, err := roomDipFigures("| room-dip | x | 1h | many |\n"); err == nil || !strings.Contains(err.Error(), "many") {
		t.Errorf("a figure that is not a number: error %v, want one naming it", err)
	}
}

// replayTableRow is one row of the replay's table in the docs
// (replay.WriteMarkdown).
type replayTableRow struct {
	policy, jobs                                   string
	cpuReclaimed, cpuViolations, memReclaimed, evs float64
	harm                                           int
}

// replayTable reads the table under replay.MarkdownHeader in doc.
func replayTable(doc string) ([]replayTableRow, error) {
	i := strings.Index(doc, replay.MarkdownHeader)
	if i < 0 {
		return nil, errors.New("no replay table (replay.MarkdownHeader)")
	}
	lines := strings.Split(doc[i:], "\n")[2:]
	var rows []replayTableRow
	num := func(s string) (float64, error) { return strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64) }
	for _, line := range lines {
		if !strings.HasPrefix(line, "|") {
			break
		}
		c := cells(line)
		if len(c) != 9 {
			return nil, fmt.Errorf("row %q: %d cells, want 9", line, len(c))
		}
		r := replayTableRow{policy: strings.Trim(c[0], "*"), jobs: c[1]}
		var err error
		for _, f := range []struct {
			dst  *float64
			cell string
		}{{&r.cpuReclaimed, c[2]}, {&r.cpuViolations, c[3]}, {&r.memReclaimed, c[5]}, {&r.evs, c[7]}} {
			if *f.dst, err = num(f.cell); err != nil {
				return nil, fmt.Errorf("row %q: %w", line, err)
			}
		}
		if r.harm, err = strconv.Atoi(c[6]); err != nil {
			return nil, fmt.Errorf("row %q: %w", line, err)
		}
		rows = append(rows, r)
	}
	return rows, nil
}

// meets says whether a row of the table meets every R1 goal.
func (r replayTableRow) meets() bool {
	return r.cpuViolations <= goals.ReplayCPUViolations.Value && float64(r.harm) <= goals.ReplayRegularHarm.Value &&
		r.cpuReclaimed >= goals.ReplayReclaimed.Value && r.memReclaimed >= goals.ReplayReclaimed.Value &&
		r.evs <= goals.ReplayEvictions.Value
}

// The design doc states which margins meet the goals; the claim must be
// what the table recorded from `go run ./hack/bench replay` shows, and that
// table must be the one docs/benchmarks.md records with its date and commit.
func TestReplayProseAgreesWithTheRecordedTable(t *testing.T) {
	design, err := os.ReadFile(designDoc)
	if err != nil {
		t.Fatal(err)
	}
	bench, err := os.ReadFile("../../" + benchmarksDoc)
	if err != nil {
		t.Fatal(err)
	}
	rows, err := replayTable(string(design))
	if err != nil {
		t.Fatalf("%s: %v", designDoc, err)
	}
	recorded, err := replayTable(string(bench))
	if err != nil {
		t.Fatalf("%s: %v", benchmarksDoc, err)
	}
	if !reflect.DeepEqual(rows, recorded) {
		t.Errorf("the replay table of %s differs from the one %s records", designDoc, benchmarksDoc)
	}
	var meeting []string
	for _, r := range rows {
		if strings.HasPrefix(r.policy, "margin ") && r.jobs == "1h" && r.meets() {
			meeting = append(meeting, strings.TrimPrefix(r.policy, "margin "))
		}
	}
	claim := regexp.MustCompile(`goals (?:hold|are met) for (no margin|margins? ([0-9.]+)(?: to ([0-9.]+))?)`).FindStringSubmatch(string(design))
	if claim == nil {
		t.Fatalf("%s states no claim of the form \"goals hold for margins A to B\" or \"for no margin\"", designDoc)
	}
	var said []string
	if claim[1] != "no margin" {
		lo, hi := claim[2], cmp.Or(claim[3], claim[2])
		in := false
		for _, r := range rows {
			m, ok := strings.CutPrefix(r.policy, "margin ")
			if !ok || r.jobs != "1h" {
				continue
			}
			in = in || m == lo
			if in {
				said = append(said, m)
			}
			if m == hi {
				break
			}
		}
	}
	if !slices.Equal(said, meeting) {
		t.Errorf("%s says the goals hold for %q: margins %v; the table shows %v", designDoc, claim[1], said, meeting)
	}
}
