package docgen

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/kube-reclaim/kube-reclaim/internal/cli"
)

// fakeRole has one flag of each kind the table must render specially.
type fakeRole struct{ plain, empty string }

func (r *fakeRole) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&r.plain, "plain", "x", "A flag.")
	fs.StringVar(&r.empty, "empty", "", "Either a|b.")
}
func (*fakeRole) Validate() error             { return nil }
func (*fakeRole) Run(_ context.Context) error { return nil }

// The up-to-date check of docs/reference.md is in cmd/kube-reclaim/app, which
// owns the list of roles; this one checks the rendering of any list.
func TestGenerateRendersEveryRoleGivenInOrder(t *testing.T) {
	spec := func(name string) cli.Spec {
		return cli.Spec{Name: name, Options: func() cli.Role { return &fakeRole{} }}
	}
	got, err := Generate(filepath.Join("..", ".."), []cli.Spec{spec("second"), spec("first")})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"## kube-reclaim second\n\n| flag | default | meaning |\n| --- | --- | --- |\n| `--empty` | `(empty)` | Either a\\|b. |\n| `--plain` | `x` | A flag. |\n",
		"## kube-reclaim first\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the reference lacks %q:\n%s", want, got)
		}
	}
	if strings.Index(got, "kube-reclaim second") > strings.Index(got, "kube-reclaim first") {
		t.Error("the roles are not in the order given")
	}
}
