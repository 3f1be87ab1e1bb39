// Package cli turns a role's options into a cobra command and runs it with
// the process-wide conventions: one flag set per role, every invalid flag
// reported at once, and graceful shutdown on the first SIGINT/SIGTERM.
package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Role is implemented by the options struct of every subcommand.
type Role interface {
	AddFlags(fs *pflag.FlagSet)
	// Validate returns every problem at once (errors.Join), not the first.
	Validate() error
	// Run builds the role from the options (everything that can fail before
	// serving) and runs it until ctx ends.
	Run(ctx context.Context) error
}

// Spec describes one role: its subcommand, and a constructor of its options
// with the defaults. The command line and the reference generator read the
// same list of Specs, so that a role cannot be on one and not the other.
type Spec struct {
	Name  string
	Short string
	// Options returns fresh options, so each caller gets its own flag values.
	Options func() Role
}

// Command builds the cobra command of the role.
func (s Spec) Command() *cobra.Command { return Command(s.Name, s.Short, s.Options()) }

// Command builds the cobra command of one role.
func Command(use, short string, role Role) *cobra.Command {
	cmd := &cobra.Command{
		Use:          use,
		Short:        short,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		// Execute prints the error once; cobra would print it again.
		SilenceErrors: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := role.Validate(); err != nil {
				return fmt.Errorf("invalid flags:\n%w", err)
			}
			return role.Run(cmd.Context())
		},
	}
	role.AddFlags(cmd.Flags())
	return cmd
}

// Execute runs root with a context cancelled by the first SIGINT or SIGTERM;
// a second signal exits at once, for an operator who does not want to wait.
// First it sets the Go runtime's soft memory limit from the container's
// (ApplyMemoryLimit).
// It returns the process exit code.
func Execute(root *cobra.Command) int {
	if _, err := ApplyMemoryLimit(); err != nil {
		fmt.Fprintln(os.Stderr, "error:", err)
		return 1
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM)
	go func() {
		s := <-sigs
		logrus.WithField("signal", s.String()).Info("shutting down")
		cancel()
		<-sigs
		logrus.Warn("second signal, exiting immediately")
		os.Exit(1)
	}()
	if err := root.ExecuteContext(ctx); err != nil {
		if errors.Is(err, context.Canceled) {
			return 0
		}
		fmt.Fprintln(os.Stderr, "error:", err)
		return 1
	}
	return 0
}
