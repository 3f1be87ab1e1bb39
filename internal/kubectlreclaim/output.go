package kubectlreclaim

import (
	"encoding/json"
	"io"

	"sigs.k8s.io/yaml"
)

// printObject writes v as indented JSON or as YAML (same field names).
func printObject(out io.Writer, v any, format string) error {
	var (
		b   []byte
		err error
	)
	if format == outputYAML {
		b, err = yaml.Marshal(v)
	} else {
		b, err = json.MarshalIndent(v, "", "  ")
		b = append(b, '\n')
	}
	if err != nil {
		return err
	}
	_, err = out.Write(b)
	return err
}
