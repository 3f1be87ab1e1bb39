package replay

import (
	"bytes"
	"context"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestShortDurationDropsZeroParts(t *testing.T) {
	for in, want := range map[string]string{"1h0m0s": "1h", "8h0m0s": "8h", "1h30m0s": "90m", "45s": "45s", "nonsense": "nonsense"} {
		if got := ShortDuration(in); got != want {
			t.Errorf("ShortDuration(%q) = %q, want %q", in, got, want)
		}
	}
}

// replayed is the report of a hand-made trace under the exact settings and
// a baseline far beyond it, with a violation of each resource.
func replayed(t *testing.T) *Report {
	t.Helper()
	s := exactSettings()
	tr := traceOf(t, []int64{2, 2, 5, 2}, []int64{1, 1, 6, 1})
	rep, err := Run(context.Background(), tr, []Contender{{Name: "exact", Settings: &s},
		{Name: "rmp", Formula: RequestsMinusPeak{Window: 5 * time.Minute, Step: tr.Step}}}, exactConfig())
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func TestWriteMarkdownRowsFollowTheHeaderAndMarkTheShipped(t *testing.T) {
	var b bytes.Buffer
	if err := WriteMarkdown(&b, []*Report{replayed(t)}, "exact"); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 4 || lines[0] != MarkdownHeader {
		t.Fatalf("table\n%s\nwant the header, its rule and two rows", b.String())
	}
	if !strings.HasPrefix(lines[2], "| **exact** | 8h | ") || !strings.HasPrefix(lines[3], "| rmp (baseline) | 8h | ") {
		t.Errorf("rows\n%s\n%s\nwant exact in bold and rmp marked as a baseline", lines[2], lines[3])
	}
	if n := strings.Count(lines[2], "|"); n != strings.Count(MarkdownHeader, "|") {
		t.Errorf("a row has %d cell borders, the header %d", n, strings.Count(MarkdownHeader, "|"))
	}
}

func TestChartsAreImagesOfTheSizeAsked(t *testing.T) {
	rep := replayed(t)
	dir := t.TempDir()
	for name, write := range map[string]func(string) error{
		"frontier.png": func(p string) error {
			return WriteFrontierChart(rep, "exact", FrontierGoals{CPUViolationRate: 0.01, Reclaimed: 0.5}, p)
		},
		"timeline.png": func(p string) error { return WriteTimelineChart(rep.Results[0].Timeline, p) },
	} {
		t.Run(name, func(t *testing.T) {
			p := filepath.Join(dir, name)
			if err := write(p); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(p)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			img, err := png.Decode(f)
			if err != nil {
				t.Fatalf("not a PNG: %v", err)
			}
			if b := img.Bounds(); b.Dx() < 500 || b.Dy() < 300 {
				t.Errorf("image of %v, want a readable chart", b)
			}
			if err := write(filepath.Join(dir, "chart.jpeg")); err == nil || !strings.Contains(err.Error(), ".png or .svg") {
				t.Errorf("a .jpeg file: error %v, want one naming the formats", err)
			}
		})
	}
}
