package manifest

import "fmt"

// InvalidError is a manifest Include decided Invalid: every inclusion rule
// keeps it, but an annotation asks for what the cluster-version-operator
// refuses, so nothing is done with it. It is an error, not an exclusion, so
// that callers report it (the operator is Degraded, the command exits 1).
type InvalidError struct {
	Manifest Manifest
	// Reason is the decision's: the annotation and its value.
	Reason string
}

func (e *InvalidError) Error() string {
	return fmt.Sprintf("%s: %s", e.Manifest, e.Reason)
}

// Decide returns the decision of Include for each manifest of ms on c; an
// *InvalidError for each manifest decided Invalid, in order; then a
// *DuplicateError for each manifest that is included or deleted and defines
// the same object as an earlier one that is too.
func Decide(ms []Manifest, c Cluster) ([]Decision, []error) {
	ds := make([]Decision, len(ms))
	var (
		kept []Manifest
		errs []error
	)
	for i, m := range ms {
		ds[i] = Include(m.Object, c)
		switch {
		case ds[i].Included || ds[i].Delete:
			kept = append(kept, m)
		case ds[i].Invalid:
			errs = append(errs, &InvalidError{Manifest: m, Reason: ds[i].Reason})
		}
	}
	return ds, append(errs, duplicates(kept)...)
}

// DuplicateError is two manifests for the same object.
type DuplicateError struct {
	First, Second Manifest
}

func (e *DuplicateError) Error() string {
	return fmt.Sprintf("%s[%d] and %s[%d] are both %s", e.First.File, e.First.Index, e.Second.File, e.Second.Index, IDOf(e.First.Object))
}

// Duplicates reports every manifest of ms whose object (ObjectID: group,
// kind, namespace, name) an earlier one already defines. Run it on the
// manifests a cluster includes: a payload legitimately carries one file per
// feature set for the same object (openshift/api ships each CRD so), and
// the cluster-version-operator loads such a payload file by file, refusing
// duplicates within a file only, which Load does. Two included manifests
// for one object would have the later silently win.
func duplicates(ms []Manifest) []error {
	var errs []error
	seen := map[ObjectID]Manifest{}
	for _, m := range ms {
		if m.Object == nil {
			continue
		}
		id := IDOf(m.Object)
		if first, ok := seen[id]; ok {
			errs = append(errs, &DuplicateError{First: first, Second: m})
			continue
		}
		seen[id] = m
	}
	return errs
}
