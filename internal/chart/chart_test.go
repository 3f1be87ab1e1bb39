package chart

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

func TestSaveWritesTheFormatTheNameAsksFor(t *testing.T) {
	grid := func() [][]*plot.Plot {
		p := plot.New()
		p.Title.Text = "room"
		l, err := plotter.NewLine(plotter.XYs{{X: 0, Y: 1}, {X: 1, Y: 2}})
		if err != nil {
			t.Fatal(err)
		}
		p.Add(l)
		return [][]*plot.Plot{{p, nil}}
	}
	dir := t.TempDir()
	for _, tc := range []struct {
		file, magic, err string
	}{
		{"a.svg", "<svg", ""},
		{"a.PNG", "\x89PNG", ""},
		{"a.jpg", "", "want a .png or .svg file"},
	} {
		t.Run(tc.file, func(t *testing.T) {
			path := filepath.Join(dir, tc.file)
			err := Save(grid(), 10*vg.Centimeter, 5*vg.Centimeter, path)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Contains(b[:min(len(b), 200)], []byte(tc.magic)) {
				t.Errorf("%s starts %q, want %q", tc.file, b[:min(len(b), 40)], tc.magic)
			}
		})
	}
	if err := Save(nil, vg.Centimeter, vg.Centimeter, filepath.Join(dir, "empty.svg")); err == nil {
		t.Error("an empty grid saved")
	}
}
