// Package webhook is `kube-reclaim webhook`: a mutating admission webhook on
// node status writes (UPDATE nodes/status, CREATE nodes) that sets
// status.capacity and status.allocatable <domain>/reclaimed-cpu and
// <domain>/reclaimed-memory from the node's <domain>/reclaimable annotation
// (the room, zero when it is stale, missing or malformed, floored at what the
// annotation says reclaimed pods held, and clamped to min(allocatable,
// capacity) of the object),
// and, for nodes that opt in,
// inflates native allocatable cpu/memory by a ratio without compounding (see
// oversell.go for the rule and its cost: opted-in nodes make kubelet PATCH
// their status every nodeStatusUpdateFrequency).
//
// On pod CREATE (PodPath, only pods the configuration's matchCondition
// selects) it sets native limits equal to each reclaimed container's grant
// and explicit native requests (package enforcement), denies pods that
// cannot be made safe, and fails closed; a PodRewriter (SetPodRewriter) may
// rewrite the pod first. On pods/resize it refuses a resize that takes a
// container past its grant.
//
// At most SetMaxInFlight reviews are read and decoded at once (inflight.go),
// and every per-node memory is bounded by entries and bytes, so memory stays
// bounded whatever is sent to the port.
//
// The node path never denies. No path makes an API call. The
// review path is shared by every kind (review.go: an AdmissionReview decoded
// by json-iterator into admission/v1-typed fields with the object decoded
// straight into a slim per-kind struct, answered with admissionv1 types); a
// mutator per kind (node.go) computes the JSONPatch as typed operations.
// NewHandler builds the HTTP handler without a cluster (benchmarks, the load
// command); Options.Run serves it over TLS with certificate reload or the
// --self-signed bootstrap (the CA, its Secret and the serving certificate
// are package certauthority's; cabundle.go keeps the caBundle patched with
// them); MutatingWebhookConfiguration builds the shipped
// webhook configuration for any clientConfig. The review the benchmarks and
// the load command send, and their baseline handler, live in
// test/benchfixture.
package webhook
