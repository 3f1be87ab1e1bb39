package docgen

import (
	"os"
	"path/filepath"
	"testing"
)

func TestReferenceIsUpToDate(t *testing.T) {
	root := filepath.Join("..", "..")
	want, err := Generate(root)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(root, "docs", "reference.md"))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatal("docs/reference.md is out of date with the flags or the policy schema: run `go run ./hack/docgen`")
	}
}
