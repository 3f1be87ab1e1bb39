package deploy

// MinKubernetes is the oldest Kubernetes release the manifests install on:
// their ValidatingAdmissionPolicies are admissionregistration.k8s.io/v1, GA
// in 1.30. deploy/README.md states it to users (a test checks they agree);
// kubectl reclaim doctor checks clusters against it.
const MinKubernetes = "1.30"
