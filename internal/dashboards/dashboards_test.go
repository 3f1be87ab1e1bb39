package dashboards

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
)

// The committed dashboards are what Build generates: editing the JSON by
// hand, or the Go code without regenerating, fails here.
func TestCommittedDashboardsAreGenerated(t *testing.T) {
	files, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	committed, err := filepath.Glob(filepath.Join("..", "..", Dir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(committed) != len(files) {
		t.Errorf("%s holds %d dashboards, Build makes %d: run go run ./hack/dashboards", Dir, len(committed), len(files))
	}
	for _, f := range files {
		got, err := os.ReadFile(filepath.Join("..", "..", Dir, f.Name))
		if err != nil {
			t.Errorf("%v: run go run ./hack/dashboards", err)
			continue
		}
		if !bytes.Equal(got, f.JSON) {
			t.Errorf("%s/%s differs from what Build generates: run go run ./hack/dashboards", Dir, f.Name)
		}
	}
}

func TestPanelsHaveUniqueIDsAndQueries(t *testing.T) {
	files, err := Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		var d gDashboard
		if err := json.Unmarshal(f.JSON, &d); err != nil {
			t.Fatalf("%s: %v", f.Name, err)
		}
		ids := map[int]bool{}
		for _, p := range d.Panels {
			if ids[p.ID] {
				t.Errorf("%s: panel id %d twice", f.Name, p.ID)
			}
			ids[p.ID] = true
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("%s: panel %q has no query", f.Name, p.Title)
			}
			if p.GridPos.X+p.GridPos.W > 24 {
				t.Errorf("%s: panel %q is wider than the dashboard", f.Name, p.Title)
			}
		}
	}
}
