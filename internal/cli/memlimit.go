package cli

import (
	"fmt"
	"math"
	"os"
	"runtime/debug"
	"strconv"
)

// MemoryLimitEnv names the environment variable holding the container's
// memory limit in bytes (deploy/ sets it from limits.memory through the
// downward API).
const MemoryLimitEnv = "KUBE_RECLAIM_MEMORY_LIMIT"

// MemoryLimitFraction of the container's memory limit is the Go runtime's
// soft memory limit. The runtime does not count the binary's own pages
// (about 27 MiB of each role's RSS, deploy/README.md, Sizing), 15 % of the
// smallest shipped limit (the extender's 176Mi): a fifth is left for them
// and the rest the runtime cannot see, so the collector works harder before
// the kernel kills the container rather than after.
const MemoryLimitFraction = 0.8

// applyMemoryLimit sets the runtime's soft memory limit to
// MemoryLimitFraction of the bytes in MemoryLimitEnv. GOMEMLIMIT, when set,
// wins: the runtime has read it already and it is left alone. It returns the
// limit set (0: none) or why the variable is not a limit.
func applyMemoryLimit(getenv func(string) string) (int64, error) {
	v := getenv(MemoryLimitEnv)
	if v == "" || getenv("GOMEMLIMIT") != "" {
		return 0, nil
	}
	limit, err := strconv.ParseInt(v, 10, 64)
	if err != nil || limit <= 0 {
		return 0, fmt.Errorf("%s=%q is not a positive count of bytes", MemoryLimitEnv, v)
	}
	soft := int64(math.Floor(float64(limit) * MemoryLimitFraction))
	debug.SetMemoryLimit(soft)
	return soft, nil
}

// ApplyMemoryLimit is applyMemoryLimit on the process environment.
func ApplyMemoryLimit() (int64, error) { return applyMemoryLimit(os.Getenv) }
