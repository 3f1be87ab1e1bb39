package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
)

// Goal operators.
const (
	atLeast = ">="
	below   = "<"
	atMost  = "<="
)

// Statuses of a row.
const (
	statusPass    = "pass"
	statusFail    = "FAIL"
	statusInfo    = "info"    // no goal of its own: context for another row
	statusMissing = "missing" // the measurement did not run or failed
)

// row is one line of the table: a measurement, its baseline (if any) and
// the goal in docs/design.md#performance-goals.
type row struct {
	ID   string `json:"id"`
	What string `json:"what"`
	// Measured and Baseline in Unit; Baseline 0 means none.
	Measured float64 `json:"measured"`
	Baseline float64 `json:"baseline,omitempty"`
	Unit     string  `json:"unit"`
	// Relative: the goal applies to Measured/Baseline, not to Measured.
	Relative bool    `json:"relative,omitempty"`
	GoalOp   string  `json:"goalOp,omitempty"`
	Goal     float64 `json:"goal,omitempty"`
	// RatioToGoal is >= 1 when the goal is met: value/goal for ">=" goals,
	// goal/value for "<" and "<=" goals; null when undefined (a zero value
	// under a "<" goal is infinitely good).
	RatioToGoal *float64 `json:"ratioToGoal"`
	Status      string   `json:"status"`
	Note        string   `json:"note,omitempty"`
}

// value is what the goal is compared with.
func (r row) value() float64 {
	if r.Relative {
		if r.Baseline == 0 {
			return 0
		}
		return r.Measured / r.Baseline
	}
	return r.Measured
}

// evaluate fills RatioToGoal and Status from the measurement and the goal.
// Rows already marked missing or without a goal are informational.
func (r row) evaluate() row {
	if r.Status == statusMissing {
		return r
	}
	if r.GoalOp == "" {
		r.Status = statusInfo
		return r
	}
	if r.Relative && r.Baseline == 0 {
		r.Status, r.Note = statusMissing, strings.TrimPrefix(r.Note+"; no baseline to compare with", "; ")
		return r
	}
	v := r.value()
	var ok bool
	switch r.GoalOp {
	case atLeast:
		ok = v >= r.Goal
		x := v / r.Goal
		r.RatioToGoal = &x
	case below, atMost:
		ok = v < r.Goal || (r.GoalOp == atMost && v == r.Goal)
		if v != 0 {
			x := r.Goal / v
			r.RatioToGoal = &x
		}
	}
	r.Status = statusFail
	if ok {
		r.Status = statusPass
	}
	return r
}

// missing is a row whose measurement could not be taken.
func missing(id, what, why string) row {
	return row{ID: id, What: what, Status: statusMissing, Note: why}
}

// formatNumber prints a value with about three significant digits.
func formatNumber(v float64) string {
	switch a := abs(v); {
	case a == 0:
		return "0"
	case a >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case a >= 10:
		return strconv.FormatFloat(v, 'f', 1, 64)
	case a >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'g', 3, 64)
	}
}

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}

func withUnit(v float64, unit string) string {
	if unit == "" {
		return formatNumber(v)
	}
	return formatNumber(v) + " " + unit
}

// cells renders a row as the table's columns.
func (r row) cells() []string {
	measured, baseline, goal, ratio := "-", "-", "-", "-"
	if r.Status != statusMissing {
		measured = withUnit(r.Measured, r.Unit)
		if r.Relative && r.Baseline != 0 {
			measured += fmt.Sprintf(" (%.2f×)", r.Measured/r.Baseline)
		}
	}
	if r.Baseline != 0 {
		baseline = withUnit(r.Baseline, r.Unit)
	}
	if r.GoalOp != "" {
		if r.Relative {
			goal = fmt.Sprintf("%s %.2f× baseline", r.GoalOp, r.Goal)
		} else {
			goal = r.GoalOp + " " + withUnit(r.Goal, r.Unit)
		}
	}
	if r.RatioToGoal != nil {
		ratio = strconv.FormatFloat(*r.RatioToGoal, 'f', 2, 64)
	} else if r.Status == statusPass {
		ratio = "∞"
	}
	return []string{r.ID, r.What, measured, baseline, goal, ratio, r.Status}
}

// machine describes where the numbers were taken.
type machine struct {
	CPU       string `json:"cpu"`
	Cores     int    `json:"cores"`
	MemoryGiB string `json:"memoryGiB"`
	Go        string `json:"go"`
	OS        string `json:"os"`
	// Load averages (1, 5, 15 min) when the run started and ended: other
	// work on the machine shows here.
	Load    string `json:"loadAverage,omitempty"`
	LoadEnd string `json:"loadAverageEnd,omitempty"`
}

func describeMachine() machine {
	m := machine{CPU: "unknown", Cores: runtime.NumCPU(), MemoryGiB: "unknown", Go: runtime.Version(), OS: runtime.GOOS + "/" + runtime.GOARCH}
	if v, ok := procField("/proc/cpuinfo", "model name", ':'); ok {
		m.CPU = v
	}
	if v, ok := procField("/proc/meminfo", "MemTotal", ':'); ok {
		if kb, err := strconv.ParseFloat(strings.TrimSuffix(v, " kB"), 64); err == nil {
			m.MemoryGiB = strconv.FormatFloat(kb/(1<<20), 'f', 1, 64)
		}
	}
	m.Load = loadAverage()
	return m
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// procField returns the value of the first "key<sep> value" line of file.
func procField(file, key string, sep byte) (string, bool) {
	f, err := os.Open(file)
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), string(sep))
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v), true
		}
	}
	return "", false
}

// report is the JSON written by `bench all`.
type report struct {
	Time    time.Time `json:"time"`
	Machine machine   `json:"machine"`
	Rows    []row     `json:"rows"`
	// Details holds each command's full result, for comparisons between runs.
	Details map[string]any `json:"details,omitempty"`
}

// renderTable writes the rows and the machine as one table.
func renderTable(w io.Writer, m machine, rows []row) {
	fmt.Fprintf(w, "machine: %s, %d cores, %s GiB, %s %s", m.CPU, m.Cores, m.MemoryGiB, m.Go, m.OS)
	if m.Load != "" {
		fmt.Fprintf(w, ", load average %s at the start", m.Load)
	}
	if m.LoadEnd != "" {
		fmt.Fprintf(w, ", %s at the end", m.LoadEnd)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "id\twhat\tmeasured\tbaseline\tgoal\tratio to goal\tresult")
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r.cells(), "\t"))
	}
	tw.Flush()
	fmt.Fprintln(w, "ratio to goal: >= 1 meets the goal (value/goal for >= goals, goal/value for < and <= goals)")
	for _, r := range rows {
		if r.Note != "" {
			fmt.Fprintf(w, "%s %s: %s\n", r.ID, r.What, r.Note)
		}
	}
}

func writeJSON(path string, rep report) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}
