package reclaimable

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Defaults shared by every role; see docs/design.md#staleness.
const (
	DefaultStaleAfter        = 10 * time.Minute
	DefaultRefreshInterval   = 5 * time.Minute
	DefaultMetricsStaleAfter = 2 * time.Minute
)

// Annotation is the JSON value of the node annotation written by the
// publisher and read by the webhook, the extender and kubectl reclaim.
type Annotation struct {
	// CPUMilli is the reclaimable CPU in millicores.
	CPUMilli int64 `json:"cpu"`
	// MemoryBytes is the reclaimable memory in bytes.
	MemoryBytes int64 `json:"memory"`
	// Policy is the name of the policy that produced the values.
	Policy string `json:"policy"`
	// Pool is the name of the pool override that selected the node, if any.
	Pool string `json:"pool,omitempty"`
	// MetricsTime is the timestamp of the newest usage sample used.
	MetricsTime time.Time `json:"metricsTime"`
	// WriteTime is when the publisher wrote the annotation; the webhook and
	// extender treat the values as zero once it is older than --stale-after.
	WriteTime time.Time `json:"writeTime"`
	// Held is what the reclaimed pods bound to the node requested when the
	// annotation was written. Readers keep the node status at or above it,
	// even when the annotation is stale or the publisher is gone, so that a
	// kubelet restart re-admits every running reclaimed pod. Annotations
	// written before the field existed lack it: held unknown counts as zero.
	Held *Resources `json:"held,omitempty"`
	// ZeroReason says why zero was published on purpose (stale metrics,
	// no samples); empty when the values came from the policy.
	ZeroReason string `json:"zeroReason,omitempty"`
	// Explanation carries every term of the formula, for kubectl reclaim explain.
	Explanation *Explanation `json:"explanation,omitempty"`
}

// MaxAnnotationBytes bounds the annotation value Parse accepts. The
// publisher writes a few hundred bytes plus the explanation, and the
// apiserver refuses more than 256 KiB of annotations on an object, so a
// longer value can only come from a forged review sent to the webhook
// directly; refusing it before decoding keeps every reader's cost bounded.
const MaxAnnotationBytes = 64 << 10

// Parse decodes an annotation value. Negative values are rejected rather than
// clamped: they can only come from a bug or a hand edit, and trusting them
// would be worse than publishing zero.
func Parse(value string) (Annotation, error) {
	var a Annotation
	if value == "" {
		return a, errors.New("annotation is empty")
	}
	if len(value) > MaxAnnotationBytes {
		return a, fmt.Errorf("annotation is %d bytes, more than the %d a publisher writes", len(value), MaxAnnotationBytes)
	}
	if err := json.Unmarshal([]byte(value), &a); err != nil {
		return Annotation{}, fmt.Errorf("annotation is not valid JSON: %w", err)
	}
	if a.CPUMilli < 0 || a.MemoryBytes < 0 {
		return Annotation{}, fmt.Errorf("annotation has negative values (cpu=%d, memory=%d)", a.CPUMilli, a.MemoryBytes)
	}
	if a.Held != nil && (a.Held.CPUMilli < 0 || a.Held.MemoryBytes < 0) {
		return Annotation{}, fmt.Errorf("annotation has negative held values (cpu=%d, memory=%d)", a.Held.CPUMilli, a.Held.MemoryBytes)
	}
	if a.WriteTime.IsZero() {
		return Annotation{}, errors.New("annotation has no writeTime")
	}
	return a, nil
}

// Room returns the room: the amounts the annotation publishes.
func (a *Annotation) Room() Resources {
	return Resources{CPUMilli: a.CPUMilli, MemoryBytes: a.MemoryBytes}
}

// HeldOrZero returns held: what reclaimed pods held at write time; zero when
// the annotation does not say.
func (a *Annotation) HeldOrZero() Resources {
	if a.Held == nil {
		return Resources{}
	}
	return *a.Held
}

// Marshal encodes the annotation value.
func (a Annotation) Marshal() (string, error) {
	b, err := json.Marshal(a)
	return string(b), err
}

// Stale reasons, stable strings used in metrics labels, logs and kubectl.
const (
	ReasonMissing       = "annotation-missing"
	ReasonMalformed     = "annotation-malformed"
	ReasonWriteTooOld   = "annotation-too-old"
	ReasonPublisherDown = "publisher-lease-expired"
	ReasonFuture        = "annotation-from-future"
)

// Freshness is the verdict on a node's annotation at one instant.
type Freshness struct {
	// Room is the room readers may count: the annotated one when fresh, zero otherwise.
	Room Resources
	// Held is what the annotation says reclaimed pods held, whenever it
	// could be parsed, fresh or not: the floor of the node status.
	Held  Resources
	Fresh bool
	// Reason is empty when fresh, one of the Reason constants otherwise.
	Reason string
	// Detail is a human-readable explanation for logs and messages.
	Detail string
	// Annotation is the parsed annotation, when it could be parsed.
	Annotation *Annotation
}

// Judge decides whether the annotation value found on a node can be trusted at
// now. leaderAlive comes from a LeaseTracker (true when not tracked).
// Clock skew: a write time slightly in the future is tolerated, far in the
// future is treated as stale because it would otherwise never expire.
func Judge(value string, present bool, now time.Time, staleAfter time.Duration, leaderAlive bool) Freshness {
	if !present {
		return Freshness{Reason: ReasonMissing, Detail: "node has no reclaimable annotation"}
	}
	a, err := Parse(value)
	if err != nil {
		return Freshness{Reason: ReasonMalformed, Detail: err.Error()}
	}
	age := now.Sub(a.WriteTime)
	held := a.HeldOrZero()
	switch {
	case age > staleAfter:
		return Freshness{Reason: ReasonWriteTooOld, Annotation: &a, Held: held,
			Detail: fmt.Sprintf("annotation written %s ago (stale after %s)", age.Round(time.Second), staleAfter)}
	case age < -staleAfter:
		return Freshness{Reason: ReasonFuture, Annotation: &a, Held: held,
			Detail: fmt.Sprintf("annotation written %s in the future", (-age).Round(time.Second))}
	case !leaderAlive:
		return Freshness{Reason: ReasonPublisherDown, Annotation: &a, Held: held,
			Detail: "publisher leader lease not renewed for two lease durations"}
	}
	return Freshness{Fresh: true, Annotation: &a, Room: a.Room(), Held: held}
}
