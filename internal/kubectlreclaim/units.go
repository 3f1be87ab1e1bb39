package kubectlreclaim

import (
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/util/duration"

	"github.com/kube-reclaim/kube-reclaim/reclaimable"
)

// FormatCPU renders millicores the way kubectl does: whole cores as "2",
// anything else in millicores ("2500m"). Negative values keep their sign.
func FormatCPU(milli int64) string {
	if milli%1000 == 0 {
		return strconv.FormatInt(milli/1000, 10)
	}
	return strconv.FormatInt(milli, 10) + "m"
}

const (
	ki = int64(1) << 10
	mi = int64(1) << 20
	gi = int64(1) << 30
	ti = int64(1) << 40
)

// FormatMemory renders bytes in binary units: exact multiples as "3Gi" or
// "512Mi"; from 1Gi up, other values with one decimal ("2.5Gi", "1.5Ti");
// below 1Gi, whole Mi (rounded); below 1Mi, Ki; below 1Ki, bytes. A value
// shown with a decimal is rounded; JSON and YAML output carry exact bytes.
func FormatMemory(bytes int64) string {
	s, _ := formatMemory(bytes)
	return s
}

// formatMemory is FormatMemory, also reporting whether the result is exact.
func formatMemory(bytes int64) (string, bool) {
	if bytes < 0 {
		if bytes == -bytes { // math.MinInt64
			return strconv.FormatInt(bytes, 10), true
		}
		s, exact := formatMemory(-bytes)
		return "-" + s, exact
	}
	unit := func(size int64, suffix string) (string, bool) {
		if bytes%size == 0 {
			return strconv.FormatInt(bytes/size, 10) + suffix, true
		}
		if size >= gi {
			return strconv.FormatFloat(float64(bytes)/float64(size), 'f', 1, 64) + suffix, false
		}
		return strconv.FormatInt((bytes+size/2)/size, 10) + suffix, false
	}
	switch {
	case bytes >= ti:
		return unit(ti, "Ti")
	case bytes >= gi:
		return unit(gi, "Gi")
	case bytes >= mi:
		return unit(mi, "Mi")
	case bytes >= ki:
		return unit(ki, "Ki")
	}
	return strconv.FormatInt(bytes, 10), true
}

// memoryExact is FormatMemory followed by the exact byte count when the
// short form is rounded, for explain, where the arithmetic must add up.
func memoryExact(bytes int64) string {
	s, exact := formatMemory(bytes)
	if exact {
		return s
	}
	return s + " (" + strconv.FormatInt(bytes, 10) + ")"
}

// pair renders one cpu/memory cell of the table.
func pair(a reclaimable.Resources) string {
	return FormatCPU(a.CPUMilli) + "/" + FormatMemory(a.MemoryBytes)
}

// age renders how long ago t was, like kubectl's AGE column; "<none>" for
// the zero time and "<invalid>" for a time more than a second in the future.
func age(now, t time.Time) string {
	if t.IsZero() {
		return "<none>"
	}
	return duration.HumanDuration(now.Sub(t))
}
