package docgen

import (
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kube-reclaim/kube-reclaim/apis/policy/v1alpha1"
	"github.com/kube-reclaim/kube-reclaim/internal/version"
)

// policyDir is the API package of the policy file, relative to the
// repository root: its doc comments are the reference's text.
var policyDir = filepath.Join("apis", "policy", "v1alpha1")

// policyTypes are the types of the file in the order the reference lists
// them, the document first.
var policyTypes = []reflect.Type{
	reflect.TypeFor[v1alpha1.ReclaimPolicy](),
	reflect.TypeFor[v1alpha1.Settings](),
	reflect.TypeFor[v1alpha1.ResourceSettings](),
	reflect.TypeFor[v1alpha1.Eviction](),
	reflect.TypeFor[v1alpha1.MemoryPressure](),
	reflect.TypeFor[v1alpha1.CPUStarvation](),
	reflect.TypeFor[v1alpha1.Pool](),
	reflect.TypeFor[v1alpha1.Profile](),
}

// policyReference renders the policy file's section: one table per type of
// apis/policy/v1alpha1 (fields, types and doc comments from the source,
// defaults from SetDefaults), then the annotated example.
func policyReference(root string) (string, error) {
	docs, err := fieldDocs(filepath.Join(root, policyDir, "types.go"))
	if err != nil {
		return "", err
	}
	example, err := os.ReadFile(filepath.Join(root, policyDir, "testdata", "example.yaml"))
	if err != nil {
		return "", err
	}
	defaults := &v1alpha1.ReclaimPolicy{}
	v1alpha1.SetDefaults(defaults)

	var b strings.Builder
	b.WriteString("## Policy file (`publisher --config`)\n\n")
	fmt.Fprintf(&b, "Read by the publisher (default and pools) and the webhook (profiles). `apiVersion: %s`, `kind: %s`. Generated from the types of `%s`. ", v1alpha1.GroupVersion, v1alpha1.Kind, filepath.ToSlash(policyDir))
	b.WriteString("Unknown and duplicate fields are errors, and every error is reported at once with its field path. ")
	fmt.Fprintf(&b, "A file without `apiVersion` and `kind` (the form before v1alpha1, the same fields) still loads, with a warning, until %s removes that form.\n\n", version.DeprecatedRemovedIn)
	for _, t := range policyTypes {
		fmt.Fprintf(&b, "### %s\n\n%s\n\n", t.Name(), docs[t.Name()])
		b.WriteString("| field | type | default | meaning |\n| --- | --- | --- | --- |\n")
		for i := range t.NumField() {
			f := t.Field(i)
			name, inline := jsonName(f)
			switch {
			case f.Anonymous && f.Type == reflect.TypeFor[metav1.TypeMeta]():
				continue // apiVersion and kind, above
			case inline:
				fmt.Fprintf(&b, "| every field of [%s](#%s) | | the default block's | |\n", f.Type.Name(), strings.ToLower(f.Type.Name()))
				continue
			}
			fmt.Fprintf(&b, "| `%s` | %s | %s | %s |\n", name, typeName(f.Type), defaultOf(defaults, t, f), docs[t.Name()+"."+f.Name])
		}
		b.WriteString("\n")
	}
	b.WriteString("### Example\n\nEvery field, with its default, explained in the comments:\n\n```yaml\n")
	b.Write(example)
	b.WriteString("```\n")
	return b.String(), nil
}

// fieldDocs returns the doc comments of the types in file ("Type") and of
// their fields ("Type.Field"), each on one line.
func fieldDocs(file string) (map[string]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ParseComments)
	if err != nil {
		return nil, err
	}
	docs := map[string]string{}
	oneLine := func(g *ast.CommentGroup) string {
		return strings.ReplaceAll(strings.Join(strings.Fields(g.Text()), " "), "|", `\|`)
	}
	for _, decl := range f.Decls {
		gen, ok := decl.(*ast.GenDecl)
		if !ok || gen.Tok != token.TYPE {
			continue
		}
		for _, spec := range gen.Specs {
			ts := spec.(*ast.TypeSpec)
			docs[ts.Name.Name] = oneLine(gen.Doc)
			st, ok := ts.Type.(*ast.StructType)
			if !ok {
				continue
			}
			for _, field := range st.Fields.List {
				for _, n := range field.Names {
					docs[ts.Name.Name+"."+n.Name] = oneLine(field.Doc)
				}
			}
		}
	}
	return docs, nil
}

// jsonName is the field's name in the file, and whether it is inlined.
func jsonName(f reflect.StructField) (string, bool) {
	name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
	return name, name == "" && strings.Contains(opts, "inline")
}

// typeName describes a Go type in the file's terms.
func typeName(t reflect.Type) string {
	switch {
	case t.Kind() == reflect.Pointer:
		return typeName(t.Elem())
	case t == reflect.TypeFor[metav1.Duration]():
		return "duration (`5m`, `30s`)"
	case t == reflect.TypeFor[metav1.LabelSelector]():
		return "label selector (`matchLabels`, `matchExpressions`: the one of a Deployment)"
	case t.Kind() == reflect.Struct:
		return fmt.Sprintf("[%s](#%s)", t.Name(), strings.ToLower(t.Name()))
	case t.Kind() == reflect.Slice:
		return "list of " + typeName(t.Elem())
	case t.Kind() == reflect.Map:
		return "map of " + typeName(t.Key()) + " to " + typeName(t.Elem())
	case t.Kind() == reflect.Float64:
		return "number"
	case t.Kind() == reflect.Int64:
		return "integer"
	}
	return t.Kind().String()
}

// defaultOf renders the built-in default of field f of type t: a field of
// the default block, or of its cpu and memory blocks.
func defaultOf(defaults *v1alpha1.ReclaimPolicy, t reflect.Type, f reflect.StructField) string {
	switch t {
	case reflect.TypeFor[v1alpha1.Settings]():
		if v := reflect.ValueOf(defaults.Default).Elem().FieldByIndex(f.Index); f.Type.Elem().Kind() != reflect.Struct ||
			f.Type.Elem() == reflect.TypeFor[metav1.Duration]() {
			return literal(v.Interface())
		}
		return "see below"
	case reflect.TypeFor[v1alpha1.ResourceSettings]():
		cpu := reflect.ValueOf(defaults.Default.CPU).Elem().FieldByIndex(f.Index)
		memory := reflect.ValueOf(defaults.Default.Memory).Elem().FieldByIndex(f.Index)
		return fmt.Sprintf("cpu %s, memory %s", literal(cpu.Interface()), literal(memory.Interface()))
	case reflect.TypeFor[v1alpha1.Eviction]():
		return "see below"
	case reflect.TypeFor[v1alpha1.MemoryPressure]():
		return literal(reflect.ValueOf(defaults.Default.Eviction.MemoryPressure).Elem().FieldByIndex(f.Index).Interface())
	case reflect.TypeFor[v1alpha1.CPUStarvation]():
		return literal(reflect.ValueOf(defaults.Default.Eviction.CPUStarvation).Elem().FieldByIndex(f.Index).Interface())
	}
	return ""
}

// literal renders a value as the file would spell it.
func literal(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return err.Error()
	}
	return "`" + strings.Trim(string(b), `"`) + "`"
}
