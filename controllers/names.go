package controllers

// The names the operator writes under, on the objects it applies and the
// Events it records: one place, since the applier, the resync check and
// the Events all sign with them.
const (
	// FieldManager owns every field the operator applies.
	FieldManager = "featuregate-operator"

	// EventSource is the reporting controller of the operator's Events.
	EventSource = "featuregate-operator"

	// ForceAnnotation, set to "true" on a manifest, takes fields over from
	// other managers on apply; without it a conflict is an error to report.
	ForceAnnotation = "featuregate-operator.io/force-ownership"
)
