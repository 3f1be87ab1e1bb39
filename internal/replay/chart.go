package replay

import (
	"fmt"
	"image/color"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"

	"github.com/kube-reclaim/kube-reclaim/internal/chart"
)

// WriteFrontierChart draws the reclaimed share against the violation rate of
// every contender, CPU and memory side by side, to path (.png or .svg).
func WriteFrontierChart(rep *Report, path string) error {
	plots := make([][]*plot.Plot, 1)
	for _, res := range []string{"CPU", "memory"} {
		p := plot.New()
		p.Title.Text = res + ": reclaimed share against violations"
		p.X.Label.Text = "violations (% of node-intervals)"
		p.Y.Label.Text = "reclaimed (% of capacity regular work left unused)"
		for i, r := range rep.Results {
			m := r.Cluster.CPU
			if res == "memory" {
				m = r.Cluster.Memory
			}
			pts := plotter.XYs{{X: 100 * m.ViolationRate, Y: 100 * m.ReclaimedShare}}
			s, err := plotter.NewScatter(pts)
			if err != nil {
				return err
			}
			s.Shape = draw.CircleGlyph{}
			s.Radius = vg.Points(4)
			s.Color = chart.Color(i)
			if r.Baseline {
				s.Shape = draw.TriangleGlyph{}
			}
			labels, err := plotter.NewLabels(plotter.XYLabels{XYs: pts, Labels: []string{r.Name}})
			if err != nil {
				return err
			}
			labels.Offset = vg.Point{X: vg.Points(6), Y: vg.Points(-3)}
			for j := range labels.TextStyle {
				labels.TextStyle[j].Font.Size = vg.Points(8)
			}
			p.Add(s, labels)
		}
		p.Add(plotter.NewGrid())
		plots[0] = append(plots[0], p)
	}
	return chart.Save(plots, 22*vg.Centimeter, 10*vg.Centimeter, path)
}

// WriteTimelineChart draws one node's allocatable, regular usage, usage plus
// the room in force, and evictions (CPU and memory, one panel each).
func WriteTimelineChart(tl *Timeline, path string) error {
	plots := make([][]*plot.Plot, 2)
	for row, res := range []string{"CPU (cores)", "memory (GiB)"} {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("node %s: %s", tl.Node, res)
		p.X.Label.Text = "days from " + tl.Start.Format("2006-01-02")
		scale, alloc := 1000.0, float64(tl.Allocatable.CPUMilli)
		if row == 1 {
			scale, alloc = float64(1<<30), float64(tl.Allocatable.MemoryBytes)
		}
		var usage, withRoom, allocLine, ev plotter.XYs
		for i := range tl.Usage {
			x := float64(time.Duration(i)*tl.Step) / float64(24*time.Hour)
			u, r := float64(tl.Usage[i].CPUMilli), float64(tl.Room[i].CPUMilli)
			if row == 1 {
				u, r = float64(tl.Usage[i].MemoryBytes), float64(tl.Room[i].MemoryBytes)
			}
			usage = append(usage, plotter.XY{X: x, Y: u / scale})
			withRoom = append(withRoom, plotter.XY{X: x, Y: (u + r) / scale})
			allocLine = append(allocLine, plotter.XY{X: x, Y: alloc / scale})
			if tl.Evictions[i] > 0 {
				ev = append(ev, plotter.XY{X: x, Y: alloc / scale})
			}
		}
		for i, l := range []struct {
			name string
			xy   plotter.XYs
		}{{"allocatable", allocLine}, {"regular usage", usage}, {"regular usage + room", withRoom}} {
			line, err := plotter.NewLine(l.xy)
			if err != nil {
				return err
			}
			line.Color = chart.Color(i)
			line.Width = vg.Points(0.7)
			p.Add(line)
			p.Legend.Add(l.name, line)
		}
		if len(ev) > 0 {
			s, err := plotter.NewScatter(ev)
			if err != nil {
				return err
			}
			s.Shape = draw.CrossGlyph{}
			s.Color = color.RGBA{R: 200, A: 255}
			p.Add(s)
			p.Legend.Add("eviction", s)
		}
		p.Legend.Top = true
		plots[row] = []*plot.Plot{p}
	}
	return chart.Save(plots, 24*vg.Centimeter, 16*vg.Centimeter, path)
}
