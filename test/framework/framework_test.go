package framework

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

const exposition = `# HELP kube_reclaim_publisher_writes_total API writes.
# TYPE kube_reclaim_publisher_writes_total counter
kube_reclaim_publisher_writes_total{kind="annotation",reason="initial"} 3
kube_reclaim_publisher_writes_total{kind="annotation",reason="refresh"} 4
kube_reclaim_publisher_writes_total{kind="status",reason="initial"} 5
# HELP kube_reclaim_publisher_is_leader 1 while leading.
# TYPE kube_reclaim_publisher_is_leader gauge
kube_reclaim_publisher_is_leader 1
# HELP kube_reclaim_webhook_review_duration_seconds Review latency.
# TYPE kube_reclaim_webhook_review_duration_seconds histogram
kube_reclaim_webhook_review_duration_seconds_bucket{le="0.1"} 6
kube_reclaim_webhook_review_duration_seconds_bucket{le="+Inf"} 7
kube_reclaim_webhook_review_duration_seconds_sum 0.5
kube_reclaim_webhook_review_duration_seconds_count 7
`

func TestSumSamplesAddsTheSeriesWhoseLabelsMatch(t *testing.T) {
	cases := []struct {
		name   string
		metric string
		labels []string
		want   float64
	}{
		{"every series of a counter", "kube_reclaim_publisher_writes_total", nil, 12},
		{"one label", "kube_reclaim_publisher_writes_total", []string{"kind", "annotation"}, 7},
		{"two labels", "kube_reclaim_publisher_writes_total", []string{"kind", "annotation", "reason", "refresh"}, 4},
		{"a label value no series has", "kube_reclaim_publisher_writes_total", []string{"kind", "lease"}, 0},
		{"a gauge", "kube_reclaim_publisher_is_leader", nil, 1},
		{"a histogram's count", "kube_reclaim_webhook_review_duration_seconds_count", nil, 7},
		{"a histogram's sum", "kube_reclaim_webhook_review_duration_seconds_sum", nil, 0.5},
		{"a histogram's bucket", "kube_reclaim_webhook_review_duration_seconds_bucket", []string{"le", "0.1"}, 6},
		{"a histogram's +Inf bucket", "kube_reclaim_webhook_review_duration_seconds_bucket", []string{"le", "+Inf"}, 7},
		{"an absent metric", "kube_reclaim_extender_binds_total", nil, 0},
		{"a prefix of a metric name is another metric", "kube_reclaim_publisher_writes", nil, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := SumSamples(strings.NewReader(exposition), tc.metric, tc.labels...)
			if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

func TestSumSamplesRejectsUnpairedLabelsAndBrokenText(t *testing.T) {
	if _, err := SumSamples(strings.NewReader(exposition), "kube_reclaim_publisher_writes_total", "kind"); err == nil {
		t.Error("an odd number of label arguments was accepted")
	}
	for _, labels := range [][]string{nil, {"le", "0.2"}, {"le", "ten"}} {
		if _, err := SumSamples(strings.NewReader(exposition), "kube_reclaim_webhook_review_duration_seconds_bucket", labels...); err == nil {
			t.Errorf("bucket %q: no error", labels)
		}
	}
	if _, err := SumSamples(strings.NewReader("metric{kind=\"a\" 1\n"), "metric"); err == nil {
		t.Error("a broken exposition was accepted")
	}
}

// The looks run on the wall clock, and Err reports two looks more than twice
// Every apart: on a loaded 2-core machine a short period saw looks more
// than twice as far apart. Periods of 400ms leave room for such stalls.

func TestAbsenceReportsWhatItsLooksSaw(t *testing.T) {
	const window, every = 2 * time.Second, 400 * time.Millisecond
	cases := []struct {
		name string
		// look sees a violation from violateAt on (never when 0) and the
		// control from controlAt on (never when 0).
		violateAt, controlAt time.Duration
		wantErr              []string
	}{
		{"nothing forbidden and the control seen", 0, 2 * every, nil},
		{"a forbidden event seen at any look fails", 3 * every, every, []string{"forbidden"}},
		{"a control no look saw fails even without forbidden events", 0, 0, []string{"positive control"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := Absence{Window: window, Every: every, Look: func(elapsed time.Duration) ([]string, bool) {
				var v []string
				if tc.violateAt > 0 && elapsed >= tc.violateAt {
					v = append(v, "forbidden")
				}
				return v, tc.controlAt > 0 && elapsed >= tc.controlAt
			}}
			r := a.Observe(context.Background())
			err := r.Err(a)
			if len(tc.wantErr) == 0 && err != nil {
				t.Errorf("unexpected error: %v", err)
			}
			for _, w := range tc.wantErr {
				if err == nil || !strings.Contains(err.Error(), w) {
					t.Errorf("error %v does not mention %q", err, w)
				}
			}
			if r.Observed < window || r.Looks < int(window/every)/2 {
				t.Errorf("%d looks over %s, want the whole %s window looked at every %s", r.Looks, r.Observed, window, every)
			}
		})
	}
}

func TestAbsenceRunsAControlAfterTheWindowAndLooksUntilItIsSeen(t *testing.T) {
	const window, every = 1600 * time.Millisecond, 400 * time.Millisecond
	var ran atomic.Bool
	var ranAt time.Time
	a := Absence{Window: window, Every: every, ControlAt: window, ControlWithin: 8 * every,
		Control: func() error { ranAt = time.Now(); ran.Store(true); return nil },
		Look: func(time.Duration) ([]string, bool) {
			// The control's effect shows two looks after it ran.
			return nil, ran.Load() && time.Since(ranAt) >= 2*every
		}}
	r := a.Observe(context.Background())
	if err := r.Err(a); err != nil {
		t.Fatal(err)
	}
	if r.ControlRan < window {
		t.Errorf("control ran %s into a %s window, want after it", r.ControlRan, window)
	}
	if r.ControlSeen < r.ControlRan+2*every {
		t.Errorf("control seen at %s, ran at %s: seen before its effect", r.ControlSeen, r.ControlRan)
	}
}

func TestEventTimeIsTheLastOccurrenceWhicheverAPIReportedIt(t *testing.T) {
	first := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	last := first.Add(time.Minute)
	cases := []struct {
		name string
		e    corev1.Event
		want time.Time
	}{
		{"core/v1 recorder: lastTimestamp", corev1.Event{FirstTimestamp: metav1.NewTime(first), LastTimestamp: metav1.NewTime(last)}, last},
		{"events.k8s.io, once: eventTime", corev1.Event{EventTime: metav1.NewMicroTime(first)}, first},
		{"events.k8s.io, repeated: the series' last observation", corev1.Event{EventTime: metav1.NewMicroTime(first),
			Series: &corev1.EventSeries{Count: 2, LastObservedTime: metav1.NewMicroTime(last)}}, last},
		{"only firstTimestamp", corev1.Event{FirstTimestamp: metav1.NewTime(first)}, first},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := EventTime(tc.e); !got.Equal(tc.want) {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}
