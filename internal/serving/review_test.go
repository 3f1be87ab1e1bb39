package serving

import "testing"

func TestBearerTokenParsesOnlyTheBearerScheme(t *testing.T) {
	for _, tc := range []struct {
		header, token string
		ok            bool
	}{
		{header: "Bearer abc", token: "abc", ok: true},
		{header: "bearer  abc ", token: "abc", ok: true},
		{header: "", ok: false},
		{header: "Bearer", ok: false},
		{header: "Bearer ", ok: false},
		{header: "Basic YWRtaW46YWRtaW4=", ok: false},
	} {
		token, ok := bearerToken(tc.header)
		if ok != tc.ok || (ok && token != tc.token) {
			t.Errorf("bearerToken(%q) = %q, %v, want %q, %v", tc.header, token, ok, tc.token, tc.ok)
		}
	}
}
