package manifest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/featuregate-operator/operator/pkg/limitedread"
)

// Manifest is one object of a payload, with where it came from so that
// logs and reports can point people at the file to fix.
type Manifest struct {
	// File is the base name of the file the object was read from.
	File string
	// Index is the 0-based index of the document within File. Empty
	// documents (only whitespace, comments or null) are not counted.
	Index int
	// Object is the decoded object; it always has apiVersion, kind and
	// metadata.name.
	Object *unstructured.Unstructured
}

// String identifies the manifest for logs, e.g.
// "0000_30_x.yaml[0] Namespace openshift-cluster-api" or
// "0000_10_y.yaml[1] ConfigMap default/always".
func (m Manifest) String() string {
	if m.Object == nil {
		return fmt.Sprintf("%s[%d]", m.File, m.Index)
	}
	name := m.Object.GetName()
	if ns := m.Object.GetNamespace(); ns != "" {
		name = ns + "/" + name
	}
	return fmt.Sprintf("%s[%d] %s %s", m.File, m.Index, m.Object.GetKind(), name)
}

// LoadError is a file or document that Load could not turn into a Manifest.
type LoadError struct {
	// File is the base name of the file.
	File string
	// Index is the document index as in Manifest.Index, or -1 when the
	// error concerns the whole file (e.g. it cannot be read).
	Index int
	// Err is the reason.
	Err error
}

func (e *LoadError) Error() string {
	if e.Index < 0 {
		return fmt.Sprintf("%s: %v", e.File, e.Err)
	}
	return fmt.Sprintf("%s[%d]: %v", e.File, e.Index, e.Err)
}

func (e *LoadError) Unwrap() error { return e.Err }

// manifestExtensions are the file name extensions Load reads, as the
// cluster-version-operator does.
var manifestExtensions = []string{".yaml", ".yml", ".json"}

// DefaultMaxFileSize bounds one manifest file. The API server stores no
// object above about 1.5 MiB, and the memory a file costs to decode is a
// multiple of its size: a payload must not be able to exhaust the pod's.
const defaultMaxFileSize = 3 << 20

// DefaultSettle is how long a file must have gone unmodified before it is
// trusted to be whole: a file rewritten in place may be read between two of
// its writer's writes.
const defaultSettle = 500 * time.Millisecond

// Options bounds what Scan reads.
type Options struct {
	// MaxFileSize bounds each file; DefaultMaxFileSize when zero.
	MaxFileSize int64
	// Settle is DefaultSettle when zero; negative: do not wait.
	Settle time.Duration
}

// Payload is what Scan found in a directory.
type Payload struct {
	// Manifests are the objects read, in payload order.
	Manifests []Manifest
	// Errors are the files and documents that could not be read, mostly
	// *LoadError: they matter (the operator is Degraded).
	Errors []error
	// Skipped are the entries that are not manifests, each with the reason
	// (a subdirectory, a file of another extension, a device or pipe).
	Skipped []Skipped
}

// Skipped is a directory entry Scan did not read.
type Skipped struct {
	Name, Reason string
}

func (s Skipped) String() string { return s.Name + ": " + s.Reason }

// Load is Scan with default options, for callers that need only the
// manifests and the errors.
func Load(dir string) ([]Manifest, []error) {
	p := Scan(dir, Options{})
	return p.Manifests, p.Errors
}

// Scan reads the manifests of a payload directory: every regular file (or
// symlink to one) directly in dir whose name ends in .yaml, .yml or .json.
// Subdirectories are not read, as payloads are flat. Manifests are returned
// in file name order, which is payload order, and in document order within
// a file. Every other entry is reported in Skipped, with its reason.
//
// A YAML file may hold several documents separated by "---"; a JSON file
// (any file whose content starts with "{") may hold a stream of objects.
// Empty documents are skipped.
//
// What is read is one consistent view: a ConfigMap volume's directory is
// read through the one ..data target it has when the scan starts (the
// kubelet swaps that link atomically), and a file modified less than Settle
// ago, or while it was read, is read again once it has settled.
//
// Problems are returned as errors, mostly *LoadError, next to whatever could
// be read: a bad document does not lose the other documents of its file nor
// other files. Only a JSON syntax error loses the rest of its file, as the
// stream cannot be resynchronized. Callers decide whether errors are fatal.
func Scan(dir string, opts Options) Payload {
	if opts.MaxFileSize <= 0 {
		opts.MaxFileSize = defaultMaxFileSize
	}
	if opts.Settle == 0 {
		opts.Settle = defaultSettle
	}
	// A ConfigMap volume: dir/name -> ..data/name, ..data -> ..<timestamp>.
	if target, err := filepath.EvalSymlinks(filepath.Join(dir, "..data")); err == nil {
		dir = target
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return Payload{Errors: []error{fmt.Errorf("read manifest directory: %w", err)}}
	}
	var p Payload
	var names []string
	for _, e := range entries {
		switch name := e.Name(); {
		case strings.HasPrefix(name, ".."):
			// The ConfigMap volume's own bookkeeping.
		case e.IsDir():
			p.Skipped = append(p.Skipped, Skipped{name, "a directory (payloads are flat)"})
		case !slices.Contains(manifestExtensions, filepath.Ext(name)):
			p.Skipped = append(p.Skipped, Skipped{name, "not a .yaml, .yml or .json file"})
		default:
			names = append(names, name)
		}
	}
	slices.Sort(names)
	for _, name := range names {
		data, err := readSettled(filepath.Join(dir, name), opts)
		var notRegular notRegularError
		switch {
		case errors.As(err, &notRegular):
			p.Skipped = append(p.Skipped, Skipped{name, notRegular.Error()})
		case err != nil:
			p.Errors = append(p.Errors, &LoadError{File: name, Index: -1, Err: err})
		default:
			fms, ferrs := decodeFile(name, data)
			p.Manifests = append(p.Manifests, fms...)
			p.Errors = append(p.Errors, ferrs...)
		}
	}
	return p
}

// notRegularError is an entry that is a device, pipe or socket (or a link
// to one): never opened, so a FIFO cannot block a run nor /dev/zero fill it.
type notRegularError struct{ mode iofs.FileMode }

func (e notRegularError) Error() string {
	return fmt.Sprintf("not a regular file (%s)", e.mode.Type())
}

// readSettled reads a whole file of at most opts.MaxFileSize bytes, and reads
// it again while it is younger than opts.Settle or changed during the read.
func readSettled(path string, opts Options) ([]byte, error) {
	const attempts = 5
	for i := 0; ; i++ {
		before, err := os.Stat(path)
		if err != nil {
			return nil, err
		}
		if !before.Mode().IsRegular() {
			return nil, notRegularError{before.Mode()}
		}
		if before.Size() > opts.MaxFileSize {
			return nil, fmt.Errorf("file is %d bytes, more than the %d-byte limit", before.Size(), opts.MaxFileSize)
		}
		if age := time.Since(before.ModTime()); opts.Settle > 0 && age < opts.Settle && i < attempts {
			time.Sleep(opts.Settle - age) // a writer is at work: let it finish
			continue
		}
		data, err := limitedread.File(path, opts.MaxFileSize)
		if _, tooLarge := errors.AsType[*limitedread.TooLargeError](err); tooLarge {
			return nil, fmt.Errorf("file grew past the %d-byte limit while it was read", opts.MaxFileSize)
		}
		if err != nil {
			return nil, err
		}
		after, err := os.Stat(path)
		if err != nil {
			return nil, err
		}
		if after.ModTime().Equal(before.ModTime()) && after.Size() == before.Size() && os.SameFile(before, after) {
			return data, nil
		}
		if i >= attempts {
			return nil, fmt.Errorf("file kept changing while it was read (%d attempts); it is read again next run", attempts+1)
		}
	}
}

// utf8BOM is tolerated at the start of a file; some editors write it.
var utf8BOM = []byte("\xef\xbb\xbf")

// decodeFile splits data into documents and decodes each one.
func decodeFile(name string, data []byte) ([]Manifest, []error) {
	data = bytes.TrimPrefix(data, utf8BOM)
	var (
		ms    []Manifest
		errs  []error
		index int
		ids   = map[ObjectID]int{}
	)
	// add decodes one document given as JSON; it is shared by both formats
	// so that YAML and JSON manifests are validated alike.
	add := func(doc []byte) {
		obj, err := decodeObject(doc)
		switch {
		case err != nil:
			errs = append(errs, &LoadError{File: name, Index: index, Err: err})
		case obj == nil:
			return // empty document, not counted
		default:
			// One file may not define an object twice (library-go's
			// ParseManifests refuses it); the first definition is kept.
			id := IDOf(obj)
			if first, ok := ids[id]; ok {
				errs = append(errs, &LoadError{File: name, Index: index, Err: fmt.Errorf("duplicate of %s[%d]: both are %s", name, first, id)})
				break
			}
			ids[id] = index
			ms = append(ms, Manifest{File: name, Index: index, Object: obj})
		}
		index++
	}

	if utilyaml.IsJSONBuffer(data) {
		dec := json.NewDecoder(bytes.NewReader(data))
		for {
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				if !errors.Is(err, io.EOF) {
					errs = append(errs, &LoadError{File: name, Index: index, Err: fmt.Errorf("parse JSON (rest of file skipped): %w", err)})
				}
				return ms, errs
			}
			add(raw)
		}
	}

	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return ms, errs
		}
		if err != nil {
			// The reader has consumed the offending line and can go on.
			errs = append(errs, &LoadError{File: name, Index: index, Err: fmt.Errorf("parse YAML: %w", err)})
			index++
			continue
		}
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			errs = append(errs, &LoadError{File: name, Index: index, Err: fmt.Errorf("parse YAML: %w", err)})
			index++
			continue
		}
		add(j)
	}
}

// decodeObject decodes one JSON document into an object and checks what
// appliers rely on. It returns nil, nil for an empty (null) document.
func decodeObject(doc []byte) (*unstructured.Unstructured, error) {
	var v interface{}
	// utiljson keeps integers as int64, as the API machinery expects.
	if err := utiljson.Unmarshal(doc, &v); err != nil {
		return nil, fmt.Errorf("decode: %w", err)
	}
	if v == nil {
		return nil, nil
	}
	obj, ok := v.(map[string]interface{})
	if !ok {
		return nil, fmt.Errorf("document is %s, not an object", jsonType(v))
	}
	u := &unstructured.Unstructured{Object: obj}
	if err := validate(u); err != nil {
		return nil, err
	}
	return u, nil
}

// validate checks the fields that identify an object and the annotations
// inclusion reads. Typed getters of Unstructured silently return zero values
// for mistyped fields; an unquoted `release.openshift.io/delete: true` would
// otherwise be ignored rather than reported.
func validate(u *unstructured.Unstructured) error {
	for _, path := range [][]string{{"apiVersion"}, {"kind"}, {"metadata", "name"}} {
		if err := requireString(u.Object, path...); err != nil {
			return err
		}
	}
	if ns, found, err := unstructured.NestedFieldNoCopy(u.Object, "metadata", "namespace"); err == nil && found && ns != nil {
		if _, ok := ns.(string); !ok {
			return fmt.Errorf("metadata.namespace is %s, not a string", jsonType(ns))
		}
	}
	a, found, err := unstructured.NestedFieldNoCopy(u.Object, "metadata", "annotations")
	if err != nil || !found || a == nil {
		return nil
	}
	am, ok := a.(map[string]interface{})
	if !ok {
		return fmt.Errorf("metadata.annotations is %s, not an object", jsonType(a))
	}
	for _, k := range sortedKeys(am) {
		if _, ok := am[k].(string); !ok {
			return fmt.Errorf("metadata.annotations[%q] is %s, not a string (quote it)", k, jsonType(am[k]))
		}
	}
	return nil
}

func requireString(obj map[string]interface{}, path ...string) error {
	field := path[0]
	for _, p := range path[1:] {
		field += "." + p
	}
	v, found, err := unstructured.NestedFieldNoCopy(obj, path...)
	if err != nil {
		// A parent is not an object, e.g. "metadata: foo".
		return fmt.Errorf("missing %s: %w", field, err)
	}
	if !found || v == nil {
		return fmt.Errorf("missing %s", field)
	}
	s, ok := v.(string)
	if !ok {
		return fmt.Errorf("%s is %s, not a string", field, jsonType(v))
	}
	if s == "" {
		return fmt.Errorf("missing %s", field)
	}
	return nil
}

func jsonType(v interface{}) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int64, float64, json.Number:
		return "a number"
	case []interface{}:
		return "a list"
	case map[string]interface{}:
		return "an object"
	default:
		return fmt.Sprintf("%T", v)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
