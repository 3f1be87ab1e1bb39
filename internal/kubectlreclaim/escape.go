package kubectlreclaim

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// Node objects and their annotation are written by kubelets and whoever may
// patch a node, so a string read from them can carry terminal control
// sequences (an ESC that recolours or moves the cursor, a CR that overwrites
// a line). The human-readable outputs escape them; json and yaml print them
// raw, as their encoders escape what their syntax needs. cli-runtime's
// printers.EscapeTerminal covers ESC and CR only.

// isControl reports whether r is a C0 or C1 control character or DEL.
func isControl(r rune) bool { return r < 0x20 || r == 0x7f || (r >= 0x80 && r <= 0x9f) }

// escapeControl returns s with every control character (isControl) written
// as its Go escape (\x1b, \r, \n, \u009b) and every byte that is not UTF-8
// as \xNN, so that nothing in s acts on the terminal or breaks a line.
func escapeControl(s string) string {
	return escapeExcept(s, "")
}

// escapeExcept is escapeControl keeping the control characters in keep.
func escapeExcept(s, keep string) string {
	clean := true
	for i := 0; i < len(s) && clean; {
		r, size := utf8.DecodeRuneInString(s[i:])
		clean = !(r == utf8.RuneError && size == 1) && (!isControl(r) || strings.ContainsRune(keep, r))
		i += size
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case isControl(r) && !strings.ContainsRune(keep, r):
			q := strconv.QuoteRuneToASCII(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// textWriter escapes the control characters of everything written to it but
// the newlines and tabs that lay out kubectl reclaim's own text: a net under
// the text outputs, whose node-written fields are escaped whole as well
// (escapeControl), newlines included. Every write is escaped on its own;
// the writers of this package never split a character across writes.
type textWriter struct{ w io.Writer }

func (t textWriter) Write(p []byte) (int, error) {
	if _, err := io.WriteString(t.w, escapeExcept(string(p), "\n\t")); err != nil {
		return 0, err
	}
	return len(p), nil
}

// escapeCells escapes every string cell of a table in place.
func escapeCells(t *metav1.Table) {
	for i := range t.Rows {
		for j, c := range t.Rows[i].Cells {
			if s, ok := c.(string); ok {
				t.Rows[i].Cells[j] = escapeControl(s)
			}
		}
	}
}

// escapedFreshness is f with the strings of its annotation and its detail
// escaped, for the text outputs. The annotation is copied: f's is the
// parsed node value, which -o json prints raw.
func escapedFreshness(f reclaimable.Freshness) reclaimable.Freshness {
	f.Detail = escapeControl(f.Detail)
	f.Reason = escapeControl(f.Reason)
	if f.Annotation == nil {
		return f
	}
	a := *f.Annotation
	a.Policy, a.Pool, a.ZeroReason = escapeControl(a.Policy), escapeControl(a.Pool), escapeControl(a.ZeroReason)
	if a.Explanation != nil {
		e := *a.Explanation
		e.CPU.Terms, e.Memory.Terms = escapedTerms(e.CPU.Terms), escapedTerms(e.Memory.Terms)
		a.Explanation = &e
	}
	f.Annotation = &a
	return f
}

func escapedTerms(terms []reclaimable.Term) []reclaimable.Term {
	out := make([]reclaimable.Term, len(terms))
	for i, t := range terms {
		t.Name, t.Note, t.Op = escapeControl(t.Name), escapeControl(t.Note), escapeControl(t.Op)
		out[i] = t
	}
	return out
}
