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
	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// FrontierGoals are the lines the frontier chart draws: the most CPU
// violations (a share of node-intervals), the most regular harm
// (node-intervals) and the least reclaimed share of each resource.
type FrontierGoals struct {
	CPUViolationRate float64
	RegularHarm      float64
	Reclaimed        float64
}

// frontierPoint is one contender on a panel of the frontier chart.
type frontierPoint struct {
	name              string
	x, y              float64
	baseline, shipped bool
}

// WriteFrontierChart draws every contender's reclaimed share against its
// CPU violations (left) and against its regular harm (right), with the goal
// lines, the contender named shipped marked, to path (.png or .svg). The x
// axis covers the candidates and twice the goal; a baseline beyond it is
// drawn on the right edge with its value, so one outlier does not crush
// every policy into a corner.
func WriteFrontierChart(rep *Report, shipped string, g FrontierGoals, path string) error {
	var cpu, mem []frontierPoint
	for _, r := range rep.Results {
		c := r.Cluster
		cpu = append(cpu, frontierPoint{name: r.Name, x: 100 * c.CPU.ViolationRate, y: 100 * c.CPU.ReclaimedShare, baseline: r.Baseline, shipped: r.Name == shipped})
		mem = append(mem, frontierPoint{name: r.Name, x: float64(c.RegularHarm), y: 100 * c.Memory.ReclaimedShare, baseline: r.Baseline, shipped: r.Name == shipped})
	}
	left, err := frontierPanel("CPU: reclaimed against violations", "CPU violations (% of node-intervals, usage + held > allocatable)", "%",
		cpu, 100*g.CPUViolationRate, 100*g.Reclaimed)
	if err != nil {
		return err
	}
	right, err := frontierPanel("memory: reclaimed against regular harm", "regular harm (node-intervals, memory usage + held > allocatable)", "",
		mem, g.RegularHarm, 100*g.Reclaimed)
	if err != nil {
		return err
	}
	return chart.Save([][]*plot.Plot{{left, right}}, 26*vg.Centimeter, 12*vg.Centimeter, path)
}

func frontierPanel(title, xLabel, unit string, pts []frontierPoint, goalX, goalY float64) (*plot.Plot, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xLabel
	p.Y.Label.Text = "reclaimed (% of capacity regular work left unused)"
	// The x axis: twice the goal and every candidate, with a tenth to spare;
	// at least 1 when everything is at 0.
	xMax := max(2*goalX, 1)
	yMin, yMax := goalY, goalY
	for _, pt := range pts {
		if !pt.baseline {
			xMax = max(xMax, pt.x)
		}
		yMin, yMax = min(yMin, pt.y), max(yMax, pt.y)
	}
	xMax *= 1.1
	p.X.Min, p.X.Max = -xMax/40, xMax
	p.Y.Min, p.Y.Max = max(yMin-5, 0), min(yMax+5, 100)
	for i, pt := range pts {
		at, label := pt.x, pt.name
		if pt.shipped {
			label += " (shipped)"
		}
		if at > xMax {
			at = xMax
			label = fmt.Sprintf("%s: %.3g%s →", pt.name, pt.x, unit)
		}
		xy := plotter.XYs{{X: at, Y: pt.y}}
		s, err := plotter.NewScatter(xy)
		if err != nil {
			return nil, err
		}
		s.Shape, s.Radius, s.Color = draw.CircleGlyph{}, vg.Points(3.5), chart.Color(i)
		if pt.baseline {
			s.Shape = draw.TriangleGlyph{}
		}
		p.Add(s)
		if pt.shipped {
			ring, err := plotter.NewScatter(xy)
			if err != nil {
				return nil, err
			}
			ring.Shape, ring.Radius, ring.Color = draw.RingGlyph{}, vg.Points(8), color.Black
			p.Add(ring)
		}
		labels, err := plotter.NewLabels(plotter.XYLabels{XYs: xy, Labels: []string{label}})
		if err != nil {
			return nil, err
		}
		labels.Offset = vg.Point{X: vg.Points(7), Y: vg.Points(-3)}
		if pt.baseline {
			// Above its point: baselines often sit beside a margin.
			labels.Offset.Y = vg.Points(4)
		}
		if at == xMax {
			labels.Offset.X = -vg.Points(7 + 4.2*float64(len(label)))
		}
		for j := range labels.TextStyle {
			labels.TextStyle[j].Font.Size = vg.Points(7.5)
		}
		p.Add(labels)
	}
	goal := color.RGBA{R: 200, A: 255}
	for _, l := range []plotter.XYs{{{X: goalX, Y: p.Y.Min}, {X: goalX, Y: p.Y.Max}}, {{X: p.X.Min, Y: goalY}, {X: p.X.Max, Y: goalY}}} {
		line, err := plotter.NewLine(l)
		if err != nil {
			return nil, err
		}
		line.Color, line.Dashes, line.Width = goal, []vg.Length{vg.Points(4), vg.Points(3)}, vg.Points(1)
		p.Add(line)
	}
	p.Legend.Add(fmt.Sprintf("goals: at most %g%s, at least %g%% reclaimed", goalX, unit, goalY), goalLegend{goal})
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p, nil
}

// goalLegend is the legend's thumbnail of a goal line.
type goalLegend struct{ c color.Color }

func (g goalLegend) Thumbnail(c *draw.Canvas) {
	y := c.Center().Y
	c.StrokeLine2(draw.LineStyle{Color: g.c, Width: vg.Points(1), Dashes: []vg.Length{vg.Points(4), vg.Points(3)}}, c.Min.X, y, c.Max.X, y)
}

// WriteTimelineChart draws one node's allocatable, regular usage, usage plus
// what batch pods held, usage plus the room in force, and the violations
// (usage + held above allocatable) and evictions (CPU and memory, one panel
// each).
func WriteTimelineChart(tl *Timeline, path string) error {
	plots := make([][]*plot.Plot, 2)
	for row, res := range []string{"CPU (cores)", "memory (GiB)"} {
		p := plot.New()
		p.Title.Text = fmt.Sprintf("node %s: %s", tl.Node, res)
		p.X.Label.Text = "days from " + tl.Start.Format("2006-01-02")
		get := func(r reclaimable.Resources) float64 { return float64(r.CPUMilli) / 1000 }
		if row == 1 {
			get = func(r reclaimable.Resources) float64 { return float64(r.MemoryBytes) / (1 << 30) }
		}
		alloc := get(tl.Allocatable)
		var usage, withHeld, withRoom, allocLine, viol, ev plotter.XYs
		for i := range tl.Usage {
			x := float64(time.Duration(i)*tl.Step) / float64(24*time.Hour)
			u := get(tl.Usage[i])
			usage = append(usage, plotter.XY{X: x, Y: u})
			withHeld = append(withHeld, plotter.XY{X: x, Y: u + get(tl.Held[i])})
			withRoom = append(withRoom, plotter.XY{X: x, Y: u + get(tl.Room[i])})
			allocLine = append(allocLine, plotter.XY{X: x, Y: alloc})
			// The interval ending at step i: the usage now against what was
			// held since the step before.
			if i > 0 && u+get(tl.Held[i-1]) > alloc {
				viol = append(viol, plotter.XY{X: x, Y: u + get(tl.Held[i-1])})
			}
			if tl.Evictions[i] > 0 {
				ev = append(ev, plotter.XY{X: x, Y: alloc * 1.06})
			}
		}
		for i, l := range []struct {
			name  string
			xy    plotter.XYs
			width float64
		}{{"allocatable", allocLine, 1.5}, {"regular usage", usage, 0.6}, {"regular usage + held by batch pods", withHeld, 0.6},
			{"regular usage + room", withRoom, 0.4}} {
			line, err := plotter.NewLine(l.xy)
			if err != nil {
				return err
			}
			line.Color, line.Width = chart.Color(i), vg.Points(l.width)
			switch i {
			case 0:
				line.Color = color.Black
			case 3:
				// Gray: the markers are red.
				line.Color = chart.Color(7)
			}
			p.Add(line)
			p.Legend.Add(l.name, line)
		}
		for _, m := range []struct {
			name  string
			xy    plotter.XYs
			shape draw.GlyphDrawer
		}{{"violation (usage + held > allocatable)", viol, draw.CircleGlyph{}}, {"eviction", ev, draw.CrossGlyph{}}} {
			if len(m.xy) == 0 {
				continue
			}
			s, err := plotter.NewScatter(m.xy)
			if err != nil {
				return err
			}
			s.Shape, s.Color, s.Radius = m.shape, color.RGBA{R: 220, A: 255}, vg.Points(2.5)
			p.Add(s)
			p.Legend.Add(fmt.Sprintf("%s (%d steps)", m.name, len(m.xy)), s)
		}
		p.Y.Min, p.Y.Max = 0, alloc*1.45
		p.Legend.Top, p.Legend.Left = true, true
		p.Legend.TextStyle.Font.Size = vg.Points(8)
		plots[row] = []*plot.Plot{p}
	}
	return chart.Save(plots, 24*vg.Centimeter, 18*vg.Centimeter, path)
}
