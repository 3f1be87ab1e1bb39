package logsample

import (
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
)

func TestAFloodLogsTheBurstThenOneLineCountingWhatWasLeftOut(t *testing.T) {
	logger, hook := test.NewNullLogger()
	s := New(10, 3)
	log := func() {
		if e, ok := s.Allow(logrus.NewEntry(logger)); ok {
			e.Warn("busy")
		}
	}
	for range 100 {
		log()
	}
	if n := len(hook.AllEntries()); n < 3 || n > 4 {
		t.Fatalf("a flood of 100 logged %d lines, want the burst of 3 (4 if a token came in between)", n)
	}
	for _, e := range hook.AllEntries() {
		if _, ok := e.Data[SuppressedKey]; ok {
			t.Errorf("a line of the burst carries %s: %v", SuppressedKey, e.Data)
		}
	}
	logged := len(hook.AllEntries())
	// A token every 100 ms: the next line is logged and says how many
	// were not.
	time.Sleep(150 * time.Millisecond)
	log()
	entries := hook.AllEntries()
	if len(entries) != logged+1 {
		t.Fatalf("after the limit refilled: %d lines, want %d", len(entries), logged+1)
	}
	if got, want := entries[logged].Data[SuppressedKey], int64(100-logged); got != want {
		t.Errorf("the line after the flood: %s = %v, want %d", SuppressedKey, got, want)
	}
	// The count starts again.
	time.Sleep(150 * time.Millisecond)
	log()
	if last := hook.LastEntry(); last.Data[SuppressedKey] != nil {
		t.Errorf("a line with none left out before it carries %s = %v", SuppressedKey, last.Data[SuppressedKey])
	}
}
