package policy

// Term names, stable identifiers of the steps of the formula for kubectl
// reclaim explain. The explanation types themselves are part of the node
// annotation and live in package reclaimable.
const (
	TermAllocatable        = "allocatable"
	TermMargin             = "margin"
	TermRegularPeakUsage   = "regular-peak-usage"
	TermSystemUsage        = "system-usage"
	TermUnmeasuredRequests = "unmeasured-requests"
	TermRegularRequests    = "regular-requests"
	TermFloor              = "floor"
	TermCap                = "cap"
	TermMinimum            = "minimum"
	// The two zero reasons appear as a single OpBase term with value 0.
	TermNoSamples    = ZeroReasonNoSamples
	TermMetricsStale = ZeroReasonStale
	TermInvalid      = ZeroReasonInvalidSettings
)
