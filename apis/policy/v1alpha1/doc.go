// Package v1alpha1 is version v1alpha1 of the policy file, the configuration
// the publisher (default and pools) and the webhook (profiles) read with
// --config:
//
//	apiVersion: kube-reclaim.io/v1alpha1
//	kind: ReclaimPolicy
//
// The package holds the typed form of the file, its defaulting (SetDefaults),
// its validation (Validate, every problem at once with its field path) and
// its conversion to the settings package policy computes with (ToConfig).
// Decoding, strict and version-aware, is internal/policyfile's.
//
// The file is a configuration file, not an API object: it has no metadata
// and no spec/status, like the kubelet's and the scheduler's configuration
// files. A field is a pointer where "not set" must differ from its zero
// value, because a pool inherits every field it does not set from the
// default block.
package v1alpha1
