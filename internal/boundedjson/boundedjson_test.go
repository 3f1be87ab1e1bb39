package boundedjson

import (
	"errors"
	"reflect"
	"testing"

	jsoniter "github.com/json-iterator/go"
)

type bounded struct {
	List []int             `json:"list" maxItems:"2"`
	Map  map[string]string `json:"map" maxItems:"1"`
}

var api = func() jsoniter.API {
	a := jsoniter.Config{}.Froze()
	a.RegisterExtension(&Extension{Decoders: map[reflect.Type]NewDecoder{
		reflect.TypeFor[[]int]():             NewSlice[int],
		reflect.TypeFor[map[string]string](): NewMap[string, string],
	}})
	return a
}()

var errTrailing = errors.New("trailing")

// An array or map is refused at its first element past the bound, before
// that element is read (junk past it is never seen); within the bounds the
// body decodes, and only white space may follow it.
func TestDecodeRefusesTheElementPastTheBoundUnread(t *testing.T) {
	for _, tt := range []struct {
		name, body string
		want       *Error // nil: no bound error
		wantErr    error  // with want nil: the error, if any
	}{
		{name: "at the bounds", body: `{"list":[1,2],"map":{"k":"v"}} `},
		{name: "null fields", body: `{"list":null,"map":null}`},
		{name: "one past the array's bound", body: `{"list":[1,2,!junk]}`, want: &Error{Field: "list", Max: 2}},
		{name: "one past the map's bound", body: `{"map":{"k":"v","k2":!junk}}`, want: &Error{Field: "map", Max: 1}},
		{name: "data after the value", body: `{"list":[1]} {}`, wantErr: errTrailing},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var v bounded
			err := Decode(api, []byte(tt.body), &v, errTrailing)
			var be *Error
			switch {
			case tt.want != nil:
				if !errors.As(err, &be) || *be != *tt.want {
					t.Fatalf("error %v, want %v", err, tt.want)
				}
			case !errors.Is(err, tt.wantErr) || (tt.wantErr == nil && err != nil):
				t.Fatalf("error %v, want %v", err, tt.wantErr)
			}
		})
	}
}

// A truncated or malformed body is an error, never a partial decode.
func TestDecodeRefusesMalformedBodies(t *testing.T) {
	for _, body := range []string{`{"list":[1`, `{"list":[1,]}`, `{"map":{"k":1}}`, ``} {
		var v bounded
		if err := Decode(api, []byte(body), &v, errTrailing); err == nil {
			t.Errorf("%q decoded without an error: %+v", body, v)
		}
	}
}
