package cli

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"golang.org/x/sync/errgroup"
)

func TestWaitReturnsTheFirstFailureAndNilOnACleanShutdown(t *testing.T) {
	failure := errors.New("listen: address in use")
	tests := []struct {
		name  string
		parts []error
		want  error
	}{
		{"every part ends cleanly", []error{nil, nil}, nil},
		{"parts stop with the context", []error{context.Canceled, fmt.Errorf("serving: %w", context.Canceled)}, nil},
		{"a part fails", []error{nil, failure}, failure},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var g errgroup.Group
			for _, err := range tt.parts {
				g.Go(func() error { return err })
			}
			if got := Wait(&g); !errors.Is(got, tt.want) || (tt.want == nil) != (got == nil) {
				t.Errorf("Wait = %v, want %v", got, tt.want)
			}
		})
	}
}

type fakeRole struct{ ran *bool }

func (r fakeRole) Run(context.Context) error { *r.ran = true; return nil }

func TestRunRunsTheRoleOnlyOnceBuilt(t *testing.T) {
	buildErr := errors.New("bad kubeconfig")
	for _, fail := range []bool{false, true} {
		ran := false
		err := Run(context.Background(), &Common{}, fail, func(fail bool) (fakeRole, error) {
			if fail {
				return fakeRole{}, buildErr
			}
			return fakeRole{ran: &ran}, nil
		})
		if fail && (!errors.Is(err, buildErr) || ran) {
			t.Errorf("a failed build: Run = %v, ran %v; want the build error and nothing run", err, ran)
		}
		if !fail && (err != nil || !ran) {
			t.Errorf("a good build: Run = %v, ran %v; want nil and the role run", err, ran)
		}
	}
}
