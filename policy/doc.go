// Package policy computes how much CPU and memory of a node can be published
// as reclaimed resources, and whether to write it. It is pure Go: no
// client-go, no Kubernetes API objects (only the value types of package
// reclaimable), no clock (the caller passes now), so that it can be tested
// with hand-written arithmetic and run over thousands of nodes per cycle.
//
// # Policies
//
// For each resource separately, with A the node's allocatable:
//
//	usage (default):    A - margin - regular-peak-usage - unmeasured-requests
//	request:            A - regular-requests
//	max-usage-request:  as usage, but regular-peak-usage counts every measured
//	                    regular pod at max(usage, request)
//
// then clamped: floor at 0, cap at A x maxRatio, and zero when below minimum.
//
//   - margin = ceil(A x margin ratio), the part of allocatable never reclaimed
//     (default 35 % of CPU and of memory). The request policy has no margin:
//     it only hands out capacity no regular pod has requested.
//   - Regular work is everything that is not a reclaimed pod. At each node
//     usage sample, its usage is the node usage minus the usage of the
//     reclaimed pods at that instant, each at most its grant (never
//     negative); system usage is the
//     node usage beyond all its pods (never negative). For max-usage-request
//     it is system usage plus, for each measured regular pod, max(usage,
//     request).
//   - regular-peak-usage is the maximum, or a nearest-rank percentile such as
//     p95, of that usage over the node samples in the window (default 5m,
//     ending at now). If the window holds no sample, the newest sample alone
//     is used.
//   - A pod sample counts for a node sample when it is the nearest one within
//     sampleAlignment (default 10s); otherwise that pod's usage is missing at
//     that instant, which only makes regular usage look larger.
//   - A regular pod is measured when it has a usage sample in the window and
//     it started no later than the newest node sample. Unmeasured regular
//     pods (new, not started, not yet scraped) count at their requests
//     (unmeasured-requests).
//   - Every fractional step rounds towards publishing less: the margin rounds
//     up, the cap rounds down, so results are integers that never
//     over-publish.
//
// The usage policies publish zero, with a ZeroReason, when the node has no
// usage sample or its newest sample is older than the stale window the
// caller passes (--metrics-stale-after). The request policy reads no usage
// and never goes stale.
//
// Every step is recorded as a Term of the Explanation in evaluation order
// (allocatable, margin, regular-peak-usage, system-usage (info),
// unmeasured-requests or regular-requests, floor, cap, minimum), so that
// ResourceExplanation.Evaluate reproduces the result.
//
// # Change gating
//
// Decide is the one decision of what the publisher writes to a node: the
// annotation on the first publish, on a decrease (except a small one, below
// --decrease-threshold, that still covers what reclaimed pods hold: that is
// noise and waits for the refresh), on an increase above the relative
// threshold (default 10 %), and when the previous write is older than the
// refresh interval, which always carries the true values; the status
// whenever it does not carry the published values.
//
// # Configuration
//
// Config is the policy file in the form this package computes with: the
// default Settings, and a list of pools, each with a name, a nodeSelector
// (every label must match exactly) and fully resolved Settings. Pools are
// tried in file order and the FIRST pool whose selector matches a node wins;
// a node matching no pool uses the default block. The file itself, its
// versions, defaulting and validation are apis/policy/v1alpha1's, and
// internal/policyfile reads it; this package keeps no decoder so that it
// stays pure logic.
//
// The same file carries profiles, read by the webhook: each a name, a
// namespaceSelector and a podSelector (metav1.LabelSelector, validated by
// apimachinery's own rules; absent matches everything), and optionally a
// schedulerName and a priorityClassName. The webhook only ever sees pods
// carrying the opt-in label <domain>/reclaimed: "true" (or already
// requesting reclaimed resources), so a profile narrows that set and never
// widens it; the FIRST profile in file order that selects a pod wins.
//
// # History
//
// History is a bounded ring buffer of usage samples per node and per pod
// that the publisher fills from metrics.k8s.io and reads back into Node.
package policy
