package replay

import (
	"fmt"
	"image/color"
	"os"
	"path/filepath"
	"strings"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
	"gonum.org/v1/plot/vg/vgsvg"
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
			s.Color = palette(i)
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
	return save(plots, 22*vg.Centimeter, 10*vg.Centimeter, path)
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
			line.Color = palette(i)
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
	return save(plots, 24*vg.Centimeter, 16*vg.Centimeter, path)
}

// save draws the grid of plots into one PNG or SVG image, told by the
// file name.
func save(plots [][]*plot.Plot, w, h vg.Length, path string) error {
	var canvas vg.CanvasWriterTo
	switch strings.ToLower(filepath.Ext(path)) {
	case ".png":
		canvas = vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(110))}
	case ".svg":
		canvas = vgsvg.New(w, h)
	default:
		return fmt.Errorf("%s: want a .png or .svg file", path)
	}
	tiles := draw.Tiles{Rows: len(plots), Cols: len(plots[0]), PadX: vg.Millimeter * 4, PadY: vg.Millimeter * 4,
		PadTop: vg.Millimeter * 2, PadBottom: vg.Millimeter * 2, PadLeft: vg.Millimeter * 2, PadRight: vg.Millimeter * 2}
	dc := draw.New(canvas)
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		for j := range plots[i] {
			plots[i][j].Draw(canvases[i][j])
		}
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := canvas.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func palette(i int) color.Color {
	cs := []color.Color{
		color.RGBA{R: 31, G: 119, B: 180, A: 255}, color.RGBA{R: 255, G: 127, B: 14, A: 255},
		color.RGBA{R: 44, G: 160, B: 44, A: 255}, color.RGBA{R: 214, G: 39, B: 40, A: 255},
		color.RGBA{R: 148, G: 103, B: 189, A: 255}, color.RGBA{R: 140, G: 86, B: 75, A: 255},
		color.RGBA{R: 227, G: 119, B: 194, A: 255}, color.RGBA{R: 127, G: 127, B: 127, A: 255},
	}
	return cs[i%len(cs)]
}
