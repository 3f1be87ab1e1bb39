package policyfile

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"

	"github.com/kube-reclaim/kube-reclaim/apis/policy/v1alpha1"
	"github.com/kube-reclaim/kube-reclaim/internal/version"
	"github.com/kube-reclaim/kube-reclaim/policy"
)

// UnversionedWarning is the warning Parse returns for a file without
// apiVersion and kind, the form written before the file was versioned. It
// still loads, to the same settings, so that no installed ConfigMap breaks
// on an upgrade, until version.DeprecatedRemovedIn.
var UnversionedWarning = fmt.Sprintf("the policy file has no apiVersion and kind; this unversioned form is deprecated and no longer loads from %s: "+
	"add \"apiVersion: %s\" and \"kind: %s\" at the top (the other fields stay as they are)", version.DeprecatedRemovedIn, v1alpha1.GroupVersion, v1alpha1.Kind)

// Parse decodes, defaults, validates and converts a policy file. The file is
// v1alpha1 (apiVersion kube-reclaim.io/v1alpha1, kind ReclaimPolicy) or the
// unversioned form, the same fields without apiVersion and kind, which loads
// with UnversionedWarning among the warnings; the caller logs them. An
// empty document gives policy.Default().
//
// Decoding is strict: an unknown or duplicate field is an error. Every
// problem is reported at once, with its field path: the error is a
// k8s.io/apimachinery aggregate of *field.Error.
func Parse(data []byte) (cfg *policy.Config, warnings []string, err error) {
	j, err := yaml.YAMLToJSONStrict(data)
	if err != nil {
		return nil, nil, fmt.Errorf("not valid YAML: %w", err)
	}
	if bytes.Equal(bytes.TrimSpace(j), []byte("null")) {
		return policy.Default(), nil, nil
	}
	var file v1alpha1.ReclaimPolicy
	errs, err := decode(j, &file)
	if err != nil {
		return nil, nil, err
	}
	if file.APIVersion == "" && file.Kind == "" {
		warnings = append(warnings, UnversionedWarning)
	} else {
		errs = append(errs, validateTypeMeta(&file)...)
	}
	v1alpha1.SetDefaults(&file)
	if errs = append(errs, withoutFields(v1alpha1.Validate(&file), errs)...); len(errs) > 0 {
		return nil, nil, errs.ToAggregate()
	}
	cfg, err = v1alpha1.ToConfig(&file)
	if err != nil {
		return nil, nil, err
	}
	return cfg, warnings, nil
}

// decode unmarshals j strictly. Unknown fields and a value of the wrong
// type are returned as field errors, for decoding goes on past them (though
// sigs.k8s.io/json reports unknown fields only once no type is wrong);
// anything else, such as a duration time.ParseDuration refuses, stops
// decoding and is err.
func decode(j []byte, file *v1alpha1.ReclaimPolicy) (field.ErrorList, error) {
	strict, err := sigsjson.UnmarshalStrict(j, file)
	var errs field.ErrorList
	var typeErr *json.UnmarshalTypeError
	switch {
	case errors.As(err, &typeErr):
		// The path has no list indices (encoding/json keeps none).
		errs = append(errs, &field.Error{Type: field.ErrorTypeTypeInvalid, Field: typeErr.Field, BadValue: typeErr.Value,
			Detail: "must be of type " + typeErr.Type.String()})
	case err != nil:
		return nil, fmt.Errorf("decoding the policy file: %w", err)
	}
	for _, e := range strict {
		path := e.Error()
		var fe sigsjson.FieldError
		if errors.As(e, &fe) {
			path = fe.FieldPath()
		}
		what, _, _ := strings.Cut(e.Error(), " \"") // "unknown field" or "duplicate field"
		errs = append(errs, field.Forbidden(field.NewPath(path), what))
	}
	return errs, nil
}

// withoutFields drops the errors of errs about a field reported already: a
// value of the wrong type leaves a zero value behind that validation would
// report again.
func withoutFields(errs, reported field.ErrorList) field.ErrorList {
	return slices.DeleteFunc(errs, func(e *field.Error) bool {
		return slices.ContainsFunc(reported, func(r *field.Error) bool { return r.Field == e.Field })
	})
}

func validateTypeMeta(file *v1alpha1.ReclaimPolicy) field.ErrorList {
	var errs field.ErrorList
	if gv := v1alpha1.GroupVersion.String(); file.APIVersion != gv {
		errs = append(errs, field.NotSupported(field.NewPath("apiVersion"), file.APIVersion, []string{gv}))
	}
	if file.Kind != v1alpha1.Kind {
		errs = append(errs, field.NotSupported(field.NewPath("kind"), file.Kind, []string{v1alpha1.Kind}))
	}
	return errs
}
