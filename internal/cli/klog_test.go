package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sirupsen/logrus"
	"k8s.io/klog/v2"
)

// captureLogs points the standard logrus logger at a buffer for the test and
// undoes SetupLogging's changes (logrus and klog are process-wide) afterwards.
func captureLogs(t *testing.T) *bytes.Buffer {
	t.Helper()
	std := logrus.StandardLogger()
	out, level, formatter := std.Out, std.GetLevel(), std.Formatter
	var buf bytes.Buffer
	std.SetOutput(&buf)
	t.Cleanup(func() {
		klog.ClearLogger()
		std.SetOutput(out)
		std.SetLevel(level)
		std.SetFormatter(formatter)
	})
	return &buf
}

func jsonLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not a JSON line: %q: %v", l, err)
		}
		lines = append(lines, m)
	}
	return lines
}

func TestKlogFollowsLogFormatAndLevel(t *testing.T) {
	emit := func() {
		klog.Info("plain info")
		klog.V(2).Info("verbose detail")
		klog.InfoS("structured info", "node", "n1", "pod", klog.KRef("ns", "p"))
		klog.ErrorS(errors.New("boom"), "structured error", "attempt", 3)
		klog.Background().WithName("leader-election").V(1).Info("contextual info", "lease", "kube-reclaim")
	}
	cases := []struct {
		name  string
		level string
		// want is the msg and level of every line, in order.
		want [][2]string
	}{
		{"info keeps V(0) and V(1) and drops V(2)", "info", [][2]string{
			{"plain info", "info"}, {"structured info", "info"}, {"structured error", "error"}, {"contextual info", "info"}}},
		{"debug adds V(2) as debug", "debug", [][2]string{
			{"plain info", "info"}, {"verbose detail", "debug"}, {"structured info", "info"}, {"structured error", "error"}, {"contextual info", "info"}}},
		{"warn suppresses every info line and keeps errors", "warn", [][2]string{
			{"structured error", "error"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			buf := captureLogs(t)
			c := DefaultCommon(":0")
			c.LogFormat, c.LogLevel = "json", tc.level
			c.SetupLogging()
			emit()
			lines := jsonLines(t, buf)
			var got [][2]string
			for _, l := range lines {
				got = append(got, [2]string{l["msg"].(string), l["level"].(string)})
			}
			if len(got) != len(tc.want) {
				t.Fatalf("got lines %q, want %q", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("line %d: got %q, want %q", i, got[i], tc.want[i])
				}
			}
			for _, l := range lines {
				switch l["msg"] {
				case "structured info":
					if l["node"] != "n1" || l["pod"] != "ns/p" || l["logger"] != "klog" {
						t.Errorf("structured info fields: %v", l)
					}
				case "structured error":
					if l["error"] != "boom" || l["attempt"] != float64(3) {
						t.Errorf("structured error fields: %v", l)
					}
				case "contextual info":
					if l["lease"] != "kube-reclaim" || l["logger"] != "klog/leader-election" {
						t.Errorf("contextual info fields: %v", l)
					}
				}
			}
		})
	}
}

func TestKlogFollowsTextFormat(t *testing.T) {
	buf := captureLogs(t)
	c := DefaultCommon(":0")
	c.SetupLogging()
	klog.InfoS("text info", "node", "n1")
	if got := buf.String(); !strings.Contains(got, `level=info msg="text info"`) || !strings.Contains(got, "node=n1") {
		t.Errorf("text line %q", got)
	}
}

func TestKlogValuesThatDoNotMarshalKeepTheLine(t *testing.T) {
	buf := captureLogs(t)
	c := DefaultCommon(":0")
	c.LogFormat = "json"
	c.SetupLogging()
	var nilRef *nilStringer
	klog.InfoS("odd values", "fn", func() {}, "nil", nilRef, "dangling")
	lines := jsonLines(t, buf)
	if len(lines) != 1 || lines[0]["msg"] != "odd values" || lines[0]["dangling"] != "<no value>" ||
		!strings.HasPrefix(lines[0]["nil"].(string), "<String panicked") {
		t.Errorf("got %v", lines)
	}
}

type nilStringer struct{ name string }

func (n *nilStringer) String() string { return n.name }
