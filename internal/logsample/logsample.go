// Package logsample bounds the log lines that callers of a server can cause.
// A path any client reaches (a review answered busy, a malformed body, a
// token that could not be reviewed) logs at most a few lines a second; the
// next line it logs says how many were left out. Metrics count every one:
// the lines only have to show what kind of thing happens, and a flood of
// requests must not become a flood of lines in the cluster's log pipeline.
package logsample

import (
	"sync/atomic"

	"github.com/sirupsen/logrus"
	"golang.org/x/time/rate"
)

// SuppressedKey is the field that carries how many lines were left out
// since the last one logged at the same place.
const SuppressedKey = "suppressed"

// Sampler decides, for one place in the code, which lines are logged.
type Sampler struct {
	limit   *rate.Limiter
	dropped atomic.Int64
}

// New logs at most perSecond lines a second on average, burst at once.
func New(perSecond float64, burst int) *Sampler {
	return &Sampler{limit: rate.NewLimiter(rate.Limit(perSecond), burst)}
}

// Default is the bound of one place reached by requests: a burst of 10
// lines, then 1 a second.
func Default() *Sampler { return New(1, 10) }

// Allow reports whether a line is logged now and, if so, returns e with
// the count of lines left out before it (when there were any).
func (s *Sampler) Allow(e *logrus.Entry) (*logrus.Entry, bool) {
	if !s.limit.Allow() {
		s.dropped.Add(1)
		return nil, false
	}
	if n := s.dropped.Swap(0); n > 0 {
		e = e.WithField(SuppressedKey, n)
	}
	return e, true
}
