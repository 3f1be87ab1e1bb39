// Package version reports the build's version, set with -ldflags at build time.
package version

import (
	"fmt"
	"runtime"
	"runtime/debug"
)

// Version is overridden by the Makefile with -X.
var Version = "dev"

// DeprecatedRemovedIn names the release that removes what is deprecated
// now (the publisher's old leader-election flag names, the policy file
// without apiVersion and kind): the minor release after the one
// deploy/components/version installs (a test checks). Help texts, warnings
// and docs name it from here.
const DeprecatedRemovedIn = "v0.2.0"

// String returns a one-line description of the build.
func String() string {
	rev := ""
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, s := range info.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				rev = " " + s.Value[:12]
			}
		}
	}
	return fmt.Sprintf("kube-reclaim %s%s %s %s/%s", Version, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH)
}
