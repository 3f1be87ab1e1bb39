//go:build !unix

package webhook

import "time"

func processCPU() (time.Duration, bool) { return 0, false }
