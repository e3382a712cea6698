package manifest

// RunLevel returns the run level of a payload file name: its "NNNN_NN"
// prefix (four digits, underscore, two digits, followed by an underscore),
// e.g. "0000_30" for "0000_30_cluster-api_capi-operator_00_namespace.yaml".
// A name without that prefix is in run level "".
//
// The cluster-version-operator applies run levels in order and the
// manifests within one level in parallel; Groups gives callers the same shape.
func runLevel(file string) string {
	const n = len("0000_00")
	if len(file) <= n || file[n] != '_' || file[4] != '_' {
		return ""
	}
	for i, c := range file[:n] {
		if i != 4 && (c < '0' || c > '9') {
			return ""
		}
	}
	return file[:n]
}

// Groups splits ms into runs of consecutive manifests with the same RunLevel
// of their File, keeping order. The caller applies groups one after the
// other; the manifests of one group do not depend on each other and may be
// applied concurrently. Groups returns nil for no manifests.
func Groups(ms []Manifest) [][]Manifest {
	var groups [][]Manifest
	for i := 0; i < len(ms); {
		level := runLevel(ms[i].File)
		j := i + 1
		for j < len(ms) && runLevel(ms[j].File) == level {
			j++
		}
		groups = append(groups, ms[i:j:j])
		i = j
	}
	return groups
}
