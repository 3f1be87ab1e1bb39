package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The picture has a panel per node with the three lines named once, and the
// demo's steps; with nothing recorded it is an error, not an empty image.
func TestChartDrawsEveryNodeAndTheSteps(t *testing.T) {
	nodes := []string{"node-0", "node-1", "node-2"}
	var samples []sample
	for i := range 40 {
		s := sample{at: time.Duration(i) * 5 * time.Second, nodes: map[string]point{}}
		for j, n := range nodes {
			held := int64(0)
			if i > 10 {
				held = 4000
			}
			s.nodes[n] = point{room: 9000 - int64(j)*1000, held: held, regular: 2000 + int64(j)*1000}
		}
		samples = append(samples, s)
	}
	marks := []mark{{at: 50 * time.Second, name: "wave 1"}, {at: 120 * time.Second, name: "usage rises"}}
	path := filepath.Join(t.TempDir(), "demo.svg")
	if err := writeChart(path, nodes, 16, samples, marks); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	svg := string(b)
	for _, want := range append(nodes, "room published", "held by batch pods", "regular pods", "wave 1", "usage rises") {
		if !strings.Contains(svg, want) {
			t.Errorf("the picture lacks %q", want)
		}
	}
	if n := strings.Count(svg, "room published"); n != 1 {
		t.Errorf("the legend appears %d times, want once", n)
	}
	if err := writeChart(filepath.Join(t.TempDir(), "empty.svg"), nodes, 16, nil, nil); err == nil {
		t.Error("a picture without samples was written")
	}
}
