package docgen

import (
	"strings"
	"testing"
)

// Every field of the policy file's types is in the reference, with its doc
// comment, so that a new field cannot be left out of it.
func TestPolicyReferenceListsEveryFieldWithItsDoc(t *testing.T) {
	root := "../.."
	got, err := policyReference(root)
	if err != nil {
		t.Fatal(err)
	}
	docs, err := fieldDocs(root + "/" + policyDir + "/types.go")
	if err != nil {
		t.Fatal(err)
	}
	rows := 0
	for _, typ := range policyTypes {
		for i := range typ.NumField() {
			f := typ.Field(i)
			name, inline := jsonName(f)
			if f.Anonymous || inline {
				continue
			}
			rows++
			doc := docs[typ.Name()+"."+f.Name]
			if doc == "" {
				t.Errorf("%s.%s has no doc comment", typ.Name(), f.Name)
			}
			if !strings.Contains(got, "| `"+name+"` | ") || !strings.Contains(got, doc) {
				t.Errorf("the reference has no row for %s.%s (%q) with its doc %q", typ.Name(), f.Name, name, doc)
			}
		}
	}
	// Positive control: the walk saw the fields the file is known to have.
	if rows < 15 || !strings.Contains(got, "| `window` | duration") || !strings.Contains(got, "`5m0s`") {
		t.Errorf("%d rows; the window row or its default is missing:\n%s", rows, got)
	}
	if !strings.Contains(got, "| `minimum` | integer | cpu `100`, memory `134217728` |") {
		t.Errorf("the per-resource defaults are missing:\n%s", got)
	}
}
