package kubectlreclaim

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-reclaim/kube-reclaim/internal/policyinput"
)

// sample reads NodeMetrics and PodMetrics once, or every --interval for
// --duration, into a. The first reading must succeed: without usage there is
// nothing to simulate. A later failure is reported and sampling goes on, as
// the publisher does.
func (s *SimulateOptions) sample(ctx context.Context, c Clients, a *policyinput.Assembler) (int, error) {
	total := 1
	if s.Duration > 0 {
		total = int(s.Duration/s.Interval) + 1
	}
	progress := newProgress(s.Streams.ErrOut, total, s.Duration > 0)
	taken := 0
	for i := 1; i <= total; i++ {
		if i > 1 {
			if err := sleep(ctx, s.Interval); err != nil {
				return taken, err
			}
		}
		nodes, pods, err := readMetrics(ctx, c, a)
		if err != nil {
			if taken == 0 {
				progress.done()
				return 0, fmt.Errorf("metrics.k8s.io: %w; simulate needs metrics-server (kubectl top nodes must work)", err)
			}
			progress.warn(i, err)
			continue
		}
		taken++
		progress.step(i, nodes, pods)
	}
	progress.done()
	return taken, nil
}

// readMetrics adds one reading and returns how many node and pod samples
// were new.
func readMetrics(ctx context.Context, c Clients, a *policyinput.Assembler) (int, int, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	nodes, err := a.ReadNodeMetrics(ctx, c.Metrics, metav1.ListOptions{})
	if err != nil {
		return 0, 0, err
	}
	pods, err := a.ReadPodMetrics(ctx, c.Metrics)
	return nodes, pods, err
}

// sleep waits between samples; tests replace it.
var sleep = func(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// progress reports sampling on stderr: a bar redrawn in place on a
// terminal, a line per sample otherwise (logs, CI).
type progress struct {
	out      io.Writer
	total    int
	enabled  bool
	terminal bool
}

func newProgress(out io.Writer, total int, enabled bool) *progress {
	p := &progress{out: out, total: total, enabled: enabled}
	if f, ok := out.(*os.File); ok {
		p.terminal = term.IsTerminal(int(f.Fd()))
	}
	return p
}

func (p *progress) step(i, nodes, pods int) {
	if !p.enabled {
		return
	}
	if p.terminal {
		const width = 30
		filled := i * width / p.total
		fmt.Fprintf(p.out, "\rSampling usage [%s%s] %d/%d", strings.Repeat("#", filled), strings.Repeat(" ", width-filled), i, p.total)
		return
	}
	fmt.Fprintf(p.out, "sample %d/%d: %d new node samples, %d new pod samples\n", i, p.total, nodes, pods)
}

func (p *progress) warn(i int, err error) {
	if p.terminal && p.enabled {
		fmt.Fprintln(p.out)
	}
	fmt.Fprintf(p.out, "Warning: sample %d/%d: metrics.k8s.io: %v; continuing\n", i, p.total, err)
}

func (p *progress) done() {
	if p.terminal && p.enabled {
		fmt.Fprintln(p.out)
	}
}
