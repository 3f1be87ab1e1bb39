// Package app is the kube-reclaim command: the one list of its roles, which
// both the command line and the reference generator (hack/docgen) read, so
// a role cannot be on one and missing from the other. It lives beside the
// binary rather than under internal/, which holds only leaf libraries that
// import no role.
package app

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/kube-reclaim/kube-reclaim/extender"
	"github.com/kube-reclaim/kube-reclaim/internal/cli"
	"github.com/kube-reclaim/kube-reclaim/internal/version"
	"github.com/kube-reclaim/kube-reclaim/publisher"
	"github.com/kube-reclaim/kube-reclaim/webhook"
)

// Roles returns the roles in the order the reference lists them.
func Roles() []cli.Spec {
	return []cli.Spec{
		{Name: "publisher", Short: "Measure every node and publish its reclaimable CPU and memory (leader-elected).",
			Options: func() cli.Role { return publisher.NewOptions() }},
		{Name: "webhook", Short: "Serve the mutating admission webhook that injects reclaimed resources into every node status write.",
			Options: func() cli.Role { return webhook.NewOptions() }},
		{Name: "extender", Short: "Serve the kube-scheduler extender that places pods onto reclaimed capacity without over-booking.",
			Options: func() cli.Role { return extender.NewOptions() }},
	}
}

// NewRootCommand returns the kube-reclaim command with every role.
func NewRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "kube-reclaim",
		Short: "Publish idle node capacity as extended resources and schedule batch pods onto it.",
		// Roles are subcommands; the bare command only prints help.
		SilenceUsage: true,
	}
	root.AddCommand(&cobra.Command{
		Use:   "version",
		Short: "Print the version.",
		Args:  cobra.NoArgs,
		Run:   func(cmd *cobra.Command, _ []string) { fmt.Fprintln(cmd.OutOrStdout(), version.String()) },
	})
	for _, r := range Roles() {
		root.AddCommand(r.Command())
	}
	return root
}

// Main runs the command line and returns the exit code.
func Main() int { return cli.Execute(NewRootCommand()) }
