package workslots

import (
	"strings"
	"testing"
	"time"
)

func TestScheduleWorksInTheSlotsItsPatternMarks(t *testing.T) {
	s := Schedule{Slot: time.Second, Pattern: "110"}
	base := time.Unix(1_800_000_000, 0) // slot 1_800_000_000, ≡ 0 mod 3
	for _, tc := range []struct {
		at      time.Duration
		slot    int64
		working bool
	}{
		{0, 1_800_000_000, true},
		{999 * time.Millisecond, 1_800_000_000, true},
		{time.Second, 1_800_000_001, true},
		{2 * time.Second, 1_800_000_002, false},
		{2999 * time.Millisecond, 1_800_000_002, false},
		{3 * time.Second, 1_800_000_003, true},
	} {
		i := s.Index(base.Add(tc.at))
		if i != tc.slot || s.Working(i) != tc.working {
			t.Errorf("at +%s: slot %d working %v, want slot %d working %v", tc.at, i, s.Working(i), tc.slot, tc.working)
		}
		if start := s.Start(i); start.After(base.Add(tc.at)) || !start.Add(s.Slot).After(base.Add(tc.at)) {
			t.Errorf("at +%s: slot %d starts %s, which does not hold the moment", tc.at, i, start)
		}
	}
}

func TestTheZeroScheduleWorksAlwaysInOneSlot(t *testing.T) {
	var s Schedule
	if err := s.Validate(); err != nil {
		t.Fatal(err)
	}
	for _, at := range []time.Time{time.Unix(0, 0), time.Now(), time.Now().Add(time.Hour)} {
		if i := s.Index(at); i != 0 || !s.Working(i) {
			t.Errorf("at %s: slot %d working %v, want slot 0 working", at, i, s.Working(i))
		}
	}
}

func TestValidateRejectsSchedulesTheBurnersCannotFollow(t *testing.T) {
	for _, tc := range []struct {
		s    Schedule
		want string
	}{
		{Schedule{Slot: time.Second}, "both"},
		{Schedule{Pattern: "10"}, "both"},
		{Schedule{Slot: -time.Second, Pattern: "10"}, "both"},
		{Schedule{Slot: time.Second, Pattern: "1x0"}, "only 0"},
	} {
		err := tc.s.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want one saying %q", tc.s, err, tc.want)
		}
	}
}

func TestParseReadsTheReportLinesAmongOtherOutput(t *testing.T) {
	reports := []Report{
		{Slot: 7, Working: true, Units: 12345, CPUNanos: 987654321, Threads: 2},
		{Slot: 8, Working: false, Threads: 2},
	}
	out := "workload: allocated 0 MiB, burning 2000 millicores\n" + reports[0].Line() + "\n" +
		"work is not a report\n" + reports[1].Line() + "\n"
	got, err := Parse(strings.NewReader(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(reports) {
		t.Fatalf("parsed %d reports, want %d: %+v", len(got), len(reports), got)
	}
	for _, r := range reports {
		if got[r.Slot] != r {
			t.Errorf("slot %d: %+v, want %+v", r.Slot, got[r.Slot], r)
		}
	}
}

func TestParseRejectsACutReportLine(t *testing.T) {
	line := Report{Slot: 7, Units: 1}.Line()
	if _, err := Parse(strings.NewReader(line[:len(line)-3] + "\n")); err == nil {
		t.Error("a cut report line parsed without an error")
	}
}
