package framework

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Poll calls cond at once and then every interval until it returns true or
// timeout passes; it returns how long that took and whether cond held.
func Poll(timeout, interval time.Duration, cond func() bool) (time.Duration, bool) {
	start := time.Now()
	err := wait.PollUntilContextTimeout(context.Background(), interval, timeout, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	return time.Since(start), err == nil
}

// Absence describes a window during which something must not happen. A
// single look after a sleep proves little: the event may be transient, or
// the observation may be blind (a dead process writes nothing, a broken
// filter matches nothing). So Look runs at the start of the window and at
// every Every until its end, and a positive control, an event of the kind
// the window forbids that the test causes on purpose, must be seen by the
// same Look.
type Absence struct {
	Window, Every time.Duration
	// Look observes once. It returns a description of every forbidden event
	// it sees (nothing when there is none) and whether it sees the control.
	// elapsed is measured from the start of the window.
	Look func(elapsed time.Duration) (violations []string, control bool)
	// Control causes the control event; it runs at the first look at or
	// after ControlAt (0: the first look; Window or later: once the window
	// has been observed to its end, after which looks go on until the
	// control is seen). Nil when Look sees a control that needs no action
	// (an event that keeps happening anyway).
	Control   func() error
	ControlAt time.Duration
	// ControlWithin bounds the wait for the control, from when Control ran
	// (from the start of the window when Control is nil). 0 means the
	// window's end.
	ControlWithin time.Duration
}

// AbsenceReport is what the looks of an Absence saw.
type AbsenceReport struct {
	Looks      int
	Violations []string
	// ControlSeen is when (from the start of the window) a look first saw
	// the control; ControlRan when Control ran. Both are -1 when it did not
	// happen.
	ControlSeen, ControlRan time.Duration
	// MaxGap is the longest time between two looks, or between the last
	// look and the end of the window.
	MaxGap time.Duration
	// Observed is how long the looks went on.
	Observed time.Duration
	err      []error
}

// Observe looks as the Absence says and reports what it saw.
func (a Absence) Observe(ctx context.Context) AbsenceReport {
	r := AbsenceReport{ControlSeen: -1, ControlRan: -1}
	within := a.ControlWithin
	if within == 0 {
		within = max(a.Window-a.ControlAt, a.Every)
	}
	start := time.Now()
	last := start
	seen := map[string]bool{}
	controlDone := func(elapsed time.Duration) bool {
		if r.ControlSeen >= 0 {
			return true
		}
		from := time.Duration(0)
		if a.Control != nil {
			if r.ControlRan < 0 {
				return false
			}
			from = r.ControlRan
		}
		return elapsed-from > within
	}
	// The condition never fails: every look is recorded, and the window's
	// end (or the control's deadline) ends the poll.
	_ = wait.PollUntilContextCancel(ctx, a.Every, true, func(context.Context) (bool, error) {
		if elapsed := time.Since(start); a.Control != nil && r.ControlRan < 0 && elapsed >= a.ControlAt {
			r.ControlRan = elapsed
			if err := a.Control(); err != nil {
				r.err = append(r.err, fmt.Errorf("the positive control failed: %w", err))
				return true, nil
			}
			// The time the control took is not a hole in the observation:
			// the look below comes right after it.
			last = time.Now()
		}
		now := time.Now()
		elapsed := now.Sub(start)
		r.MaxGap = max(r.MaxGap, now.Sub(last))
		last = now
		v, control := a.Look(elapsed)
		r.Looks++
		for _, s := range v {
			// A lasting event is reported once, at the look that first saw it.
			if !seen[s] {
				seen[s] = true
				r.Violations = append(r.Violations, fmt.Sprintf("[%5.1fs] %s", elapsed.Seconds(), s))
			}
		}
		if control && r.ControlSeen < 0 && (a.Control == nil || r.ControlRan >= 0) {
			r.ControlSeen = elapsed
		}
		return elapsed >= a.Window && controlDone(elapsed), nil
	})
	r.Observed = time.Since(start)
	if r.Observed < a.Window {
		r.MaxGap = max(r.MaxGap, a.Window-last.Sub(start))
	}
	return r
}

// Err joins every problem: the forbidden events seen, a window not observed
// throughout (two looks more than twice Every apart), and a control that no
// look saw, which would make the absence of events prove nothing.
func (r AbsenceReport) Err(a Absence) error {
	errs := append([]error(nil), r.err...)
	for _, v := range r.Violations {
		errs = append(errs, errors.New(v))
	}
	if r.Observed < a.Window {
		errs = append(errs, fmt.Errorf("looked for %s of a %s window", r.Observed.Round(100*time.Millisecond), a.Window))
	}
	if r.MaxGap > 2*a.Every {
		errs = append(errs, fmt.Errorf("looks up to %s apart, want every %s: the window was not observed throughout", r.MaxGap.Round(time.Millisecond), a.Every))
	}
	if r.ControlSeen < 0 {
		errs = append(errs, errors.New("no look saw the positive control: the observation would not have seen the event either"))
	}
	return errors.Join(errs...)
}

// ExpectAbsence observes a and fails t with every problem Err finds.
func ExpectAbsence(t testing.TB, a Absence) AbsenceReport {
	t.Helper()
	r := a.Observe(context.Background())
	if err := r.Err(a); err != nil {
		t.Errorf("%v", err)
	}
	return r
}
