package webhook

import (
	"errors"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/kube-reclaim/kube-reclaim/internal/boundedjson"
)

// Bounded decoding. Anyone who reaches the webhook's port can send a review
// the apiserver never would, so every array and map of a slim object
// carries a maxItems tag, and the decoder stops at the first element past
// it, before decoding that element (internal/boundedjson): what a review
// can make the webhook hold is bounded by the tags, not by the body. The
// bounds are listed in README.md.

// boundsExtension bounds the types a maxItems tag of the slim objects may
// bound.
var boundsExtension = &boundedjson.Extension{Decoders: map[reflect.Type]boundedjson.NewDecoder{
	reflect.TypeFor[map[string]string]():      boundedjson.NewMap[string, string],
	reflect.TypeFor[corev1.ResourceList]():    boundedjson.NewMap[corev1.ResourceName, resource.Quantity],
	reflect.TypeFor[[]podContainer]():         boundedjson.NewSlice[podContainer],
	reflect.TypeFor[[]corev1.ResourceClaim](): boundedjson.NewSlice[corev1.ResourceClaim],
}}

// errBytesLeft: only white space may follow the review (what Unmarshal
// checks).
var errBytesLeft = errors.New("bytes left after the review")

// decodeReview decodes body into v as reviewJSON.Unmarshal does, and
// returns a *boundedjson.Error when an array or map of v is past its bound.
func decodeReview(body []byte, v any) error {
	return boundedjson.Decode(reviewJSON, body, v, errBytesLeft)
}

// skipped is a JSON value that is checked and passed over without being
// copied (see reviewJSON).
type skipped struct{}
