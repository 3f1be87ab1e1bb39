package main

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// designDoc is where the goal table lives, relative to this package.
const designDoc = "../../docs/design.md"

// threshold is one comparison in a goal: an operator, a number and a unit.
type threshold struct {
	Op    string
	Value float64
	Unit  string // "×" for a ratio to the baseline
}

func (t threshold) String() string {
	return strings.TrimSpace(t.Op + " " + strconv.FormatFloat(t.Value, 'f', -1, 64) + " " + t.Unit)
}

// thresholdOf is how a goal of the code's table reads in the document.
func thresholdOf(g goal) threshold {
	if g.Relative {
		return threshold{Op: g.Op, Value: g.Value, Unit: "×"}
	}
	return threshold{Op: g.Op, Value: g.Value, Unit: g.Unit}
}

// comparison is an operator, a number and, if one follows, a unit; "±3 %"
// and "at 2000 reviews/s" are conditions, not comparisons, and do not match.
var comparison = regexp.MustCompile(`(>=|<=|≥|≤|<)\s*([0-9]+(?:\.[0-9]+)?)(?:\s*(×|%|MiB|MB|ms|s\b))?`)

var docOps = map[string]string{">=": atLeast, "≥": atLeast, "<=": atMost, "≤": atMost, "<": below}

// parseThresholds lists the comparisons of a goal cell, in order.
func parseThresholds(cell string) ([]threshold, error) {
	var out []threshold
	for _, m := range comparison.FindAllStringSubmatch(cell, -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			return nil, err
		}
		out = append(out, threshold{Op: docOps[m[1]], Value: v, Unit: m[3]})
	}
	return out, nil
}

// linkText matches an id cell written as a link, "[P1](#p1-webhook)".
var linkText = regexp.MustCompile(`^\[([^\]]+)\]\([^)]*\)$`)

// goalTable returns the goal column of the document's table whose header
// has an "id" and a "goal" column, by id.
func goalTable(doc string) (map[string]string, error) {
	lines := strings.Split(doc, "\n")
	for i, l := range lines {
		header := cells(l)
		idCol, goalCol := slices.Index(header, "id"), slices.Index(header, "goal")
		if idCol < 0 || goalCol < 0 {
			continue
		}
		out := map[string]string{}
		for _, l := range lines[i+2:] { // past the header and its --- line
			c := cells(l)
			if c == nil {
				break
			}
			if len(c) <= max(idCol, goalCol) {
				return nil, &tableError{line: l}
			}
			id := c[idCol]
			if m := linkText.FindStringSubmatch(id); m != nil {
				id = m[1]
			}
			out[id] = c[goalCol]
		}
		return out, nil
	}
	return nil, &tableError{}
}

type tableError struct{ line string }

func (e *tableError) Error() string {
	if e.line == "" {
		return "no table with an id and a goal column"
	}
	return "goal table row with too few columns: " + e.line
}

func TestDesignGoalTableMatchesTheCodesGoals(t *testing.T) {
	b, err := os.ReadFile(designDoc)
	if err != nil {
		t.Fatal(err)
	}
	table, err := goalTable(string(b))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{} // row -> thresholds from the code
	phrases := map[string][]string{}
	for name, g := range allGoals() {
		if g.Row == "" || g.Op == "" {
			t.Errorf("goal %s has no row or operator", name)
			continue
		}
		if g.Phrase != "" {
			phrases[g.Row] = append(phrases[g.Row], g.Phrase)
			continue
		}
		want[g.Row] = append(want[g.Row], thresholdOf(g).String())
	}
	for row := range table {
		if _, ok := want[row]; !ok && len(phrases[row]) == 0 {
			t.Errorf("docs/design.md states goal %s, which hack/bench's goals table does not have", row)
		}
	}
	for row := range want {
		cell, ok := table[row]
		if !ok {
			t.Errorf("hack/bench's goals table has goals of %s, which docs/design.md's goal table does not", row)
			continue
		}
		got, err := parseThresholds(cell)
		if err != nil {
			t.Errorf("%s: %v", row, err)
			continue
		}
		var gotS []string
		for _, th := range got {
			gotS = append(gotS, th.String())
		}
		slices.Sort(gotS)
		w := slices.Clone(want[row])
		slices.Sort(w)
		if !slices.Equal(gotS, w) {
			t.Errorf("goal %s: docs/design.md states %q, hack/bench's goals table %q", row, gotS, w)
		}
	}
	for name, g := range allGoals() {
		if g.MedianOf > 0 && !strings.Contains(table[g.Row], fmt.Sprintf("median of %d", g.MedianOf)) {
			t.Errorf("goal %s is on the median of %d runs; docs/design.md's row %s does not say \"median of %d\"", name, g.MedianOf, g.Row, g.MedianOf)
		}
	}
	for row, ps := range phrases {
		for _, p := range ps {
			if !strings.Contains(table[row], p) {
				t.Errorf("goal %s: docs/design.md does not say %q", row, p)
			}
		}
	}
}

func TestParseThresholds(t *testing.T) {
	for _, tc := range []struct {
		name, cell string
		want       []string
	}{
		{"unicode and ascii operators", "≤ 0.3 ms CPU; p99 < 5 ms; >= 2 s", []string{"<= 0.3 ms", "< 5 ms", ">= 2 s"}},
		{"ratio to a baseline", "≥ 0.9 × the throughput", []string{">= 0.9 ×"}},
		{"a word after the number is not a unit", "≤ 1 API write per node", []string{"<= 1"}},
		{"mebibytes and megabytes apart", "publisher < 200 MB, extender < 80 MiB peak", []string{"< 200 MB", "< 80 MiB"}},
		{"percent", "CPU violations ≤ 1 % and memory ≤ 0.1 %", []string{"<= 1 %", "<= 0.1 %"}},
		{"conditions are not comparisons", "with ±3 % usage noise at 2000 reviews/s", nil},
		{"a longer number is not its prefix", "≥ 0.95 ×", []string{">= 0.95 ×"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := parseThresholds(tc.cell)
			if err != nil {
				t.Fatal(err)
			}
			var s []string
			for _, th := range got {
				s = append(s, th.String())
			}
			if !slices.Equal(s, tc.want) {
				t.Errorf("parseThresholds(%q) = %q, want %q", tc.cell, s, tc.want)
			}
		})
	}
}

func TestGoalTableReadsTheGoalColumnByID(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      map[string]string
		wantErr   bool
	}{
		{
			name: "linked and plain ids, text after the table ignored",
			doc:  "intro\n\n| id | what | goal |\n| --- | --- | --- |\n| [P1](#p1) | a | < 1 ms |\n| R | b | ≥ 50 % |\n\nafter | not a row\n",
			want: map[string]string{"P1": "< 1 ms", "R": "≥ 50 %"},
		},
		{name: "no goal table", doc: "| a | b |\n| --- | --- |\n", wantErr: true},
		{name: "short row", doc: "| id | what | goal |\n| --- | --- | --- |\n| P1 | a |\n", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := goalTable(tc.doc)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("%s: got %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

func TestGoalsPrintAsTheCommandsShowThem(t *testing.T) {
	for _, tc := range []struct {
		g    goal
		want string
	}{
		{goal{Op: atMost, Value: 0.3, Unit: "ms"}, "<= 0.3 ms"},
		{goal{Op: atLeast, Value: 0.9, Relative: true}, ">= 0.90× baseline"},
		{goal{Op: atMost, Value: 1}, "<= 1"},
	} {
		if got := tc.g.String(); got != tc.want {
			t.Errorf("%+v: got %q, want %q", tc.g, got, tc.want)
		}
	}
}

func TestAGoalSetsItsRowsThresholdAndUnit(t *testing.T) {
	r := goals.SchedulingRatio.on(row{Measured: 95, Baseline: 100, Unit: "pods/s"}).evaluate()
	if r.Status != statusPass || !r.Relative || r.Goal != goals.SchedulingRatio.Value || r.Unit != "pods/s" {
		t.Errorf("a row given the scheduling goal: %+v", r)
	}
	r = goals.PublisherPeak.on(row{Measured: 250}).evaluate()
	if r.Status != statusFail || r.Unit != "MB" || r.GoalOp != below {
		t.Errorf("a row given the publisher's peak goal: %+v", r)
	}
}
