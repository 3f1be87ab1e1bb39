// Package workslots is what the workload image's CPU burners and the tests
// that read them agree on: a schedule of wall-clock slots in which the
// burners work or rest, and the line the workload prints for every slot
// with the work it did. Every container on a machine reads one clock, so
// pods given schedules of the same slot length take turns in step, and a
// test compares their work slot by slot: a measurement with and without a
// neighbour a second apart, under the same load from the rest of the
// machine.
package workslots

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
)

// Schedule says when burners work: slot i (counted from the Unix epoch in
// units of Slot) is a working slot when Pattern[i mod len(Pattern)] is '1',
// a resting one when it is '0'. The zero Schedule works all the time and
// has one endless slot.
type Schedule struct {
	Slot    time.Duration
	Pattern string
}

// Validate reports a schedule the burners cannot follow.
func (s Schedule) Validate() error {
	var errs []error
	if s.Slot < 0 || (s.Slot == 0) != (s.Pattern == "") {
		errs = append(errs, fmt.Errorf("a schedule needs both a positive slot length and a pattern, got slot %s, pattern %q", s.Slot, s.Pattern))
	}
	if strings.Trim(s.Pattern, "01") != "" {
		errs = append(errs, fmt.Errorf("pattern %q: only 0 (rest) and 1 (work) allowed", s.Pattern))
	}
	return errors.Join(errs...)
}

// Index is the slot t falls in.
func (s Schedule) Index(t time.Time) int64 {
	if s.Slot <= 0 {
		return 0
	}
	return t.UnixNano() / int64(s.Slot)
}

// Start is when slot i begins.
func (s Schedule) Start(i int64) time.Time { return time.Unix(0, i*int64(s.Slot)) }

// Working reports whether slot i is one to work in.
func (s Schedule) Working(i int64) bool {
	if s.Pattern == "" {
		return true
	}
	return s.Pattern[i%int64(len(s.Pattern))] == '1'
}

// Report is the work a workload's burners did in one slot, all threads
// together.
type Report struct {
	Slot    int64 `json:"slot"`
	Working bool  `json:"working"`
	// Units are fixed chunks of arithmetic: the burners' throughput.
	Units int64 `json:"units"`
	// CPUNanos is the CPU time the burner threads got in the slot.
	CPUNanos int64 `json:"cpuNanos"`
	// Threads is how many burner threads reported.
	Threads int `json:"threads"`
}

// prefix starts every report line, so they stand out among other output.
const prefix = "workslots: "

// Line is the report as the workload prints it, without a newline.
func (r Report) Line() string {
	b, err := json.Marshal(r)
	if err != nil {
		panic(err) // a struct of numbers always marshals
	}
	return prefix + string(b)
}

// Parse reads every report line of a workload's output, skipping other
// lines, and returns the reports by slot. A report line that does not
// decode is an error: the output was cut or is not the workload's.
func Parse(r io.Reader) (map[int64]Report, error) {
	out := map[int64]Report{}
	sc := bufio.NewScanner(r)
	for n := 1; sc.Scan(); n++ {
		rest, ok := strings.CutPrefix(sc.Text(), prefix)
		if !ok {
			continue
		}
		var rep Report
		if err := json.Unmarshal([]byte(rest), &rep); err != nil {
			return nil, fmt.Errorf("line %d %q: %w", n, sc.Text(), err)
		}
		out[rep.Slot] = rep
	}
	return out, sc.Err()
}
