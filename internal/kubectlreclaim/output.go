package kubectlreclaim

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/cli-runtime/pkg/printers"
)

// SchemeGroupVersion is the apiVersion of the documents -o json|yaml print.
// They are kubectl reclaim's reports, not API objects: no server serves this
// group; the printers of k8s.io/cli-runtime only need every document typed.
var SchemeGroupVersion = schema.GroupVersion{Group: "kubectl.kube-reclaim.io", Version: "v1alpha1"}

func typeMeta(kind string) metav1.TypeMeta {
	return metav1.TypeMeta{APIVersion: SchemeGroupVersion.String(), Kind: kind}
}

// Output formats besides those of genericclioptions.PrintFlags.
const (
	outputTable = ""
	outputWide  = "wide"
	outputName  = "name"
)

// outputFlags are -o and its companions. The table and wide formats go to
// the cli-runtime table printer; every other format (json, yaml, name,
// go-template, jsonpath, ...) to the printer genericclioptions.PrintFlags
// builds, so the plugin prints like kubectl get.
type outputFlags struct {
	print *genericclioptions.PrintFlags
	// table is whether the subcommand has the table and wide formats
	// (explain prints text instead).
	table     bool
	noHeaders bool
}

// newOutputFlags returns the flags of a subcommand printing a table (table
// true, with -o wide, -o name and --no-headers) or text.
func newOutputFlags(table bool) *outputFlags {
	f := &outputFlags{print: genericclioptions.NewPrintFlags(""), table: table}
	if !table {
		// -o name names API objects; an explanation is not one.
		f.print.NamePrintFlags = nil
	}
	return f
}

func (f *outputFlags) addFlags(cmd *cobra.Command) {
	f.print.AddFlags(cmd)
	// Reports have no managedFields.
	_ = cmd.Flags().MarkHidden("show-managed-fields")
	if f.table {
		cmd.Flags().BoolVar(&f.noHeaders, "no-headers", f.noHeaders, "Do not print the header line of the table (table and wide output).")
	}
	usage := "Output format: " + strings.Join(f.allowed(), ", ") + "; "
	if f.table {
		usage += "the table when empty."
	} else {
		usage += "text when empty."
	}
	cmd.Flags().Lookup("output").Usage = usage
}

// format is -o; as in kubectl, --template without -o means go-template.
func (f *outputFlags) format() string {
	format := *f.print.OutputFormat
	if t := f.print.TemplatePrinterFlags.TemplateArgument; format == outputTable && t != nil && *t != "" {
		return "go-template"
	}
	return format
}

// humanReadable is whether the table (or explain's text) is printed.
func (f *outputFlags) humanReadable() bool {
	switch f.format() {
	case outputTable:
		return true
	case outputWide:
		return f.table
	}
	return false
}

// machineReadable is whether one document is printed (json, yaml,
// templates) rather than rows or names.
func (f *outputFlags) machineReadable() bool {
	return !f.humanReadable() && f.format() != outputName
}

func (f *outputFlags) allowed() []string {
	var formats []string
	if f.table {
		formats = append(formats, outputWide)
	}
	return append(formats, f.print.AllowedFormats()...)
}

// validate checks -o and the template flags without printing anything.
func (f *outputFlags) validate() error {
	if f.humanReadable() {
		return nil
	}
	// Templates come as -o jsonpath=TEMPLATE.
	if name, _, _ := strings.Cut(f.format(), "="); !slices.Contains(f.allowed(), name) {
		empty := "text"
		if f.table {
			empty = "table"
		}
		return fmt.Errorf("--output: %q is not one of %s (or empty for the %s)", f.format(), strings.Join(f.allowed(), ", "), empty)
	}
	_, err := f.print.ToPrinter()
	return wrapOutput(err)
}

func wrapOutput(err error) error {
	if err != nil {
		return fmt.Errorf("--output: %w", err)
	}
	return nil
}

// printTable prints table with the table printer (-o wide adds the columns
// of priority 1) or, for -o name, the object of every row.
func (f *outputFlags) printTable(out io.Writer, table *metav1.Table, withNamespace bool) error {
	if f.format() == outputName {
		p, err := f.print.ToPrinter()
		if err != nil {
			return err
		}
		for _, row := range table.Rows {
			if err := p.PrintObj(row.Object.Object, out); err != nil {
				return err
			}
		}
		return nil
	}
	escapeCells(table)
	p := printers.NewTablePrinter(printers.PrintOptions{Wide: f.format() == outputWide, NoHeaders: f.noHeaders, WithNamespace: withNamespace})
	return p.PrintObj(table, out)
}

// printDocument prints doc in a machine-readable format (json, yaml,
// templates).
func (f *outputFlags) printDocument(out io.Writer, doc runtime.Object) error {
	p, err := f.print.ToPrinter()
	if err != nil {
		return err
	}
	return p.PrintObj(doc, out)
}

// rowObject is what a table row stands for: its namespace column comes
// from it, and -o name prints it (as kubectl does, "node/NAME").
func rowObject(kind, namespace, name string) runtime.RawExtension {
	return runtime.RawExtension{Object: &metav1.PartialObjectMetadata{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: kind},
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
	}}
}
