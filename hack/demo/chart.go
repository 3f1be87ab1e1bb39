package main

import (
	"context"
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"sync"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/kube-reclaim/kube-reclaim/internal/chart"
)

// point is one node's CPU at one look (millicores): the room it publishes,
// what its batch pods hold, and what its regular pods use.
type point struct {
	room, held, regular int64
}

// sample is one look at every node, at a time since the demo's start.
type sample struct {
	at    time.Duration
	nodes map[string]point
}

// mark is a step of the demo (a wave, the usage change), drawn across the
// chart.
type mark struct {
	at   time.Duration
	name string
}

// recorder keeps what the demo's picture draws.
type recorder struct {
	mu      sync.Mutex
	samples []sample
	marks   []mark
}

func (r *recorder) add(at time.Duration, rows []nodeRow) {
	s := sample{at: at, nodes: make(map[string]point, len(rows))}
	for _, row := range rows {
		s.nodes[row.name] = point{room: row.pubCPU, held: row.reqCPU, regular: row.regularCPU}
	}
	r.mu.Lock()
	r.samples = append(r.samples, s)
	r.mu.Unlock()
}

func (r *recorder) mark(at time.Duration, name string) {
	r.mu.Lock()
	r.marks = append(r.marks, mark{at: at, name: name})
	r.mu.Unlock()
}

// record looks at the nodes every period until the returned stop is called.
func (d *demo) record(ctx context.Context, every time.Duration) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if rows, err := d.rows(ctx); err == nil {
				d.rec.add(time.Since(d.start), rows)
			}
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}

// imagePath is where the demo writes its picture: DEMO_IMAGE (.svg or
// .png), or kube-reclaim-demo.svg in the temporary directory.
func imagePath() string {
	if p := os.Getenv("DEMO_IMAGE"); p != "" {
		return p
	}
	return filepath.Join(os.TempDir(), "kube-reclaim-demo.svg")
}

// writeChart draws one panel per node, two a row: over the run, the CPU
// room the node published, what its batch pods held and what its regular
// pods used, in cores up to allocCores, with the demo's steps marked. The
// legend is drawn in the first panel and the steps named in the second,
// above allocCores where no line goes.
func writeChart(path string, nodes []string, allocCores float64, samples []sample, marks []mark) error {
	if len(samples) == 0 {
		return fmt.Errorf("%s: no sample to draw", path)
	}
	const cols = 2
	rows := (len(nodes) + cols - 1) / cols
	grid := make([][]*plot.Plot, rows)
	for i := range grid {
		grid[i] = make([]*plot.Plot, cols)
	}
	// From the first look, when kube-reclaim started: the demo's first run
	// builds the control plane for minutes before that.
	seconds := func(d time.Duration) float64 { return (d - samples[0].at).Seconds() }
	for i, n := range nodes {
		p := plot.New()
		p.Title.Text = n + ": CPU (cores)"
		if i/cols == rows-1 {
			p.X.Label.Text = "seconds since kube-reclaim started"
		}
		p.Y.Min, p.Y.Max = 0, allocCores*1.3
		series := []struct {
			name string
			get  func(point) int64
		}{
			{"room published", func(pt point) int64 { return pt.room }},
			{"held by batch pods", func(pt point) int64 { return pt.held }},
			{"regular pods' usage", func(pt point) int64 { return pt.regular }},
		}
		for j, s := range series {
			var xy plotter.XYs
			for _, smp := range samples {
				if pt, ok := smp.nodes[n]; ok {
					xy = append(xy, plotter.XY{X: seconds(smp.at), Y: float64(s.get(pt)) / 1000})
				}
			}
			if len(xy) == 0 {
				continue
			}
			line, err := plotter.NewLine(xy)
			if err != nil {
				return err
			}
			line.Color = chart.Color(j)
			line.Width = vg.Points(1.2)
			p.Add(line)
			if i == 0 {
				p.Legend.Add(s.name, line)
			}
		}
		alloc, err := plotter.NewLine(plotter.XYs{{X: seconds(samples[0].at), Y: allocCores}, {X: seconds(samples[len(samples)-1].at), Y: allocCores}})
		if err != nil {
			return err
		}
		alloc.Color = color.Gray{Y: 90}
		p.Add(alloc)
		if i == 0 {
			p.Legend.Add("allocatable", alloc)
		}
		for _, m := range marks {
			x := seconds(m.at)
			line, err := plotter.NewLine(plotter.XYs{{X: x, Y: 0}, {X: x, Y: allocCores}})
			if err != nil {
				return err
			}
			line.Color = color.Gray{Y: 160}
			line.Dashes = []vg.Length{vg.Points(3), vg.Points(3)}
			p.Add(line)
			if i == 1 || len(nodes) == 1 {
				labels, err := plotter.NewLabels(plotter.XYLabels{XYs: plotter.XYs{{X: x, Y: allocCores * 1.05}}, Labels: []string{" " + m.name}})
				if err != nil {
					return err
				}
				for k := range labels.TextStyle {
					labels.TextStyle[k].Font.Size = vg.Points(8)
				}
				p.Add(labels)
			}
		}
		p.Legend.Top = true
		p.Legend.Left = true
		p.Legend.TextStyle.Font.Size = vg.Points(8)
		p.Add(plotter.NewGrid())
		grid[i/cols][i%cols] = p
	}
	return chart.Save(grid, 26*vg.Centimeter, vg.Length(rows)*6*vg.Centimeter, path)
}
