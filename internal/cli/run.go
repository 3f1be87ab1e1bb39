package cli

import (
	"context"
	"errors"

	"golang.org/x/sync/errgroup"
)

// Runner is a role built from its options, ready to run until ctx ends.
type Runner interface {
	Run(ctx context.Context) error
}

// Run is every role's Options.Run: logging from the common flags, then
// newRole (everything that can fail before serving), then the role's Run.
func Run[O any, R Runner](ctx context.Context, c *Common, o O, newRole func(O) (R, error)) error {
	c.SetupLogging()
	r, err := newRole(o)
	if err != nil {
		return err
	}
	return r.Run(ctx)
}

// Wait is the tail of every role's Run: it waits for the parts in g, the
// first to fail having stopped the others, and returns that failure, or nil
// on a clean shutdown (the end of ctx is not a failure).
func Wait(g *errgroup.Group) error {
	if err := g.Wait(); err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}
