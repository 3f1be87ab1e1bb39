package kubectlreclaim

import (
	"math"
	"testing"
	"time"
)

func TestFormatCPU(t *testing.T) {
	tests := []struct {
		name  string
		milli int64
		want  string
	}{
		{"zero is 0", 0, "0"},
		{"whole cores drop the m", 2000, "2"},
		{"fractions stay in millicores", 2500, "2500m"},
		{"below a core", 1, "1m"},
		{"negative free keeps its sign", -500, "-500m"},
		{"negative whole cores", -3000, "-3"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FormatCPU(tt.milli); got != tt.want {
				t.Errorf("FormatCPU(%d) = %q, want %q", tt.milli, got, tt.want)
			}
		})
	}
}

func TestFormatMemory(t *testing.T) {
	tests := []struct {
		name  string
		bytes int64
		want  string
	}{
		{"zero is 0", 0, "0"},
		{"below a Ki stays in bytes", 1000, "1000"},
		{"whole Ki", 4096, "4Ki"},
		{"Ki rounds to nearest", 1536 + 400, "2Ki"},
		{"whole Mi", 512 << 20, "512Mi"},
		{"below a Gi rounds to whole Mi", 100<<20 + 700<<10, "101Mi"},
		{"whole Gi", 3 << 30, "3Gi"},
		{"Gi with one decimal", 2<<30 + 512<<20, "2.5Gi"},
		{"decimal Gi rounds", 17824114278, "16.6Gi"},
		{"whole Ti", 2 << 40, "2Ti"},
		{"Ti with one decimal", 1<<40 + 1<<39, "1.5Ti"},
		{"negative free keeps its sign", -(512 << 20), "-512Mi"},
		{"negative decimal", -(1<<30 + 1<<29), "-1.5Gi"},
		{"the smallest int64 does not overflow", math.MinInt64, "-9223372036854775808"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := FormatMemory(tt.bytes); got != tt.want {
				t.Errorf("FormatMemory(%d) = %q, want %q", tt.bytes, got, tt.want)
			}
		})
	}
}

func TestMemoryExactAddsBytesOnlyWhenRounded(t *testing.T) {
	tests := []struct {
		bytes int64
		want  string
	}{
		{64 << 30, "64Gi"},
		{6871947674, "6.4Gi (6871947674)"},
		{100<<20 + 1, "100Mi (104857601)"},
		{-(2 << 30), "-2Gi"},
		{0, "0"},
	}
	for _, tt := range tests {
		if got := memoryExact(tt.bytes); got != tt.want {
			t.Errorf("memoryExact(%d) = %q, want %q", tt.bytes, got, tt.want)
		}
	}
}

func TestAgeLikeKubectl(t *testing.T) {
	tests := []struct {
		name string
		t    time.Time
		want string
	}{
		{"no time", time.Time{}, "<none>"},
		{"seconds", now.Add(-42 * time.Second), "42s"},
		{"minutes", now.Add(-25 * time.Minute), "25m"},
		{"minutes and seconds", now.Add(-(2*time.Minute + 30*time.Second)), "2m30s"},
		{"hours", now.Add(-5 * time.Hour), "5h"},
		{"slightly in the future (clock skew)", now.Add(500 * time.Millisecond), "0s"},
		{"far in the future", now.Add(time.Hour), "<invalid>"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := age(now, tt.t); got != tt.want {
				t.Errorf("age = %q, want %q", got, tt.want)
			}
		})
	}
}
