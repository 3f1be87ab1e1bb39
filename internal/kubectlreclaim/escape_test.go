package kubectlreclaim

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

func TestEscapeControlWritesEveryControlCharacterAsAnEscape(t *testing.T) {
	tests := []struct{ in, want string }{
		{"batch", "batch"},
		{"\x1b[31mred", `\x1b[31mred`},
		{"a\rb", `a\rb`},
		{"two\nlines\tand a tab", `two\nlines\tand a tab`},
		{"del\x7f", `del\x7f`},
		{"c1 csi \u009b2J", `c1 csi \u009b2J`},
		{"bell\a nul\x00", `bell\a nul\x00`},
		{"not utf-8 \x9b\xff", `not utf-8 \x9b\xff`},
		{"ünïcode ≥ ok", "ünïcode ≥ ok"},
	}
	for _, tt := range tests {
		if got := escapeControl(tt.in); got != tt.want {
			t.Errorf("escapeControl(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// hostile is a node whose annotation (written by whoever may patch the node)
// and labels carry terminal control sequences in every free-text field.
func hostile() world {
	const evil = "\x1b[31mred\r\x1b]0;title\a\n"
	explanation := usageExplanation()
	explanation.CPU.Terms[0].Note = "note" + evil
	explanation.CPU.Terms[1].Name = "term" + evil
	n := annotated("node-x", reclaimable.Annotation{CPUMilli: 4900, MemoryBytes: 17824114278, Policy: "usage", Pool: "pool" + evil,
		ZeroReason: "why" + evil, MetricsTime: now.Add(-45 * time.Second), WriteTime: now.Add(-30 * time.Second), Explanation: explanation},
		reclaimable.Resources{CPUMilli: 4900, MemoryBytes: 17824114278})
	n.Labels["pool"] = "pool" + evil
	return world{objects: []runtime.Object{n}}
}

func TestHumanReadableOutputEscapesNodeWrittenControlCharacters(t *testing.T) {
	tests := []struct {
		name string
		args []string
		// shows is escaped text the output must contain: the field is there,
		// only its control characters are escaped.
		shows []string
	}{
		{"nodes table", []string{"nodes"}, []string{`pool\x1b[31mred\r\x1b]0;title\a\n`, `why\x1b[31mred\r`}},
		{"nodes wide", []string{"nodes", "-o", "wide"}, []string{`pool\x1b[31mred\r`}},
		{"explain", []string{"explain", "node-x"}, []string{`pool\x1b[31mred\r`, `note\x1b[31mred\r`, `term\x1b[31mred\r`, `why\x1b[31mred\r`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, errOut, err := run(t, hostile(), tt.args...)
			if err != nil {
				t.Fatalf("%v (stderr %q)", err, errOut)
			}
			for _, c := range out {
				if isControl(c) && c != '\n' && c != '\t' {
					t.Fatalf("output carries control character %U:\n%q", c, out)
				}
			}
			for _, line := range strings.Split(out, "\n") {
				if strings.HasPrefix(line, "red") || strings.HasPrefix(line, "title") {
					t.Errorf("a node-written newline started a line of its own: %q", line)
				}
			}
			for _, want := range tt.shows {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
		})
	}
}

func TestJSONOutputKeepsNodeWrittenStringsRaw(t *testing.T) {
	out, _, err := run(t, hostile(), "nodes", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var list NodeList
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	if got := list.Items[0].Annotation; got == nil || !strings.HasPrefix(got.Pool, "pool\x1b[31mred\r") {
		t.Errorf("json pool %+v, want the raw value (the encoder escapes it)", got)
	}
	if strings.ContainsRune(out, 0x1b) || strings.ContainsRune(out, '\r') {
		t.Errorf("the json encoder left a raw control character: %q", out)
	}
}
