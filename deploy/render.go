// Package deploy holds the kustomize manifests of kube-reclaim (the YAML in
// this directory) and renders them with the kustomize Go API, exactly as
// `kubectl apply -k` would: for `make manifests` (hack/manifests) and for the
// tests that check the rendered objects.
package deploy

import (
	"embed"
	"fmt"
	"io/fs"
	"path"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/resmap"
	"sigs.k8s.io/kustomize/kyaml/filesys"
)

// Overlays are the installable kustomizations, relative to deploy/:
// `kubectl apply -k deploy/<overlay>`. deploy/ itself points at "default";
// "own-scheduler" is for clusters whose own kube-scheduler takes the
// extender (no kube-reclaim-scheduler); "plugin-scheduler" runs
// kube-reclaim-scheduler with the placement plugin instead of kube-scheduler
// and the extender sidecar.
var Overlays = []string{"default", "cert-manager", "own-scheduler", "plugin-scheduler"}

//go:embed kustomization.yaml base components default cert-manager own-scheduler plugin-scheduler webhook scheduler
var manifests embed.FS

// root is where the embedded tree sits in the in-memory filesystem.
const root = "/deploy"

// Render builds the kustomization dir (relative to deploy/: an overlay, a
// base such as "base/webhook", or "." for deploy/ itself) and returns one
// multi-document YAML stream.
func Render(dir string) ([]byte, error) {
	m, err := run(dir, nil)
	if err != nil {
		return nil, err
	}
	return m.AsYaml()
}

// Objects builds the kustomization dir like Render and returns its objects in
// kustomize's order (namespaces, RBAC and CRDs before the objects using them).
func Objects(dir string) ([]*unstructured.Unstructured, error) {
	return ObjectsWith(dir, nil)
}

// ObjectsWith is Objects with extra files (paths relative to deploy/, for
// example "mine/kustomization.yaml") added beside the shipped ones: a
// kustomization of one's own that names the shipped overlays and
// components, as deploy/README.md tells users to write.
func ObjectsWith(dir string, extra map[string]string) ([]*unstructured.Unstructured, error) {
	m, err := run(dir, extra)
	if err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	for _, r := range m.Resources() {
		// Through JSON: numbers become int64/float64 as client-go expects.
		b, err := r.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", r.CurId(), err)
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(b); err != nil {
			return nil, fmt.Errorf("%s: %w", r.CurId(), err)
		}
		objs = append(objs, obj)
	}
	return objs, nil
}

// run builds dir from the embedded tree plus extra files (paths relative to
// deploy/, for tests of kustomizations the README describes).
func run(dir string, extra map[string]string) (resmap.ResMap, error) {
	mem := filesys.MakeFsInMemory()
	err := fs.WalkDir(manifests, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := manifests.ReadFile(p)
		if err != nil {
			return err
		}
		return mem.WriteFile(path.Join(root, p), b)
	})
	if err != nil {
		return nil, fmt.Errorf("loading the embedded manifests: %w", err)
	}
	for p, content := range extra {
		if err := mem.WriteFile(path.Join(root, p), []byte(content)); err != nil {
			return nil, err
		}
	}
	// Legacy order, as `kubectl kustomize`: namespaces, CRDs, RBAC first,
	// webhook configurations last.
	opts := krusty.MakeDefaultOptions()
	opts.Reorder = krusty.ReorderOptionLegacy
	m, err := krusty.MakeKustomizer(opts).Run(mem, path.Join(root, dir))
	if err != nil {
		return nil, fmt.Errorf("kustomize build deploy/%s: %w", path.Clean(dir), err)
	}
	return m, nil
}
