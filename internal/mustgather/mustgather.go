// Package mustgather reads what `oc adm must-gather` or `oc adm inspect`
// collected, as a support engineer receives it: the directory, or the
// archive (.tar, .tar.gz) read in place, without extracting it. It answers
// two questions about an object: is it there (Present, Absent, or Unknown
// when its resource was not collected whole), and what is it (Get, as a
// controller-runtime client.Reader, for the few objects a tool reads from
// the cluster: the FeatureGate, the ClusterVersion).
//
// Layout: an image directory holds cluster-scoped objects under
// cluster-scoped-resources/<group>/ and namespaced ones under
// namespaces/<namespace>/<group>/ (the core group spelled "core"), each
// either in <resource>/<name>.yaml or as an item of <resource>.yaml, a List
// of every object of the resource there. An inspected namespace has its
// directory namespaces/<name>/. A must-gather run with several images has
// one image directory each; an object is looked for in all of them.
package mustgather

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

// Presence is what a must-gather knows of an object.
type Presence int

const (
	// Absent: its resource was collected whole, and it is not there.
	Absent Presence = iota
	// Present: it is there.
	Present
	// Unknown: its resource was not collected, or only some of its objects
	// (related objects are gathered by name).
	Unknown
)

// Options configures Open.
type Options struct {
	// Plurals names the resources of kinds whose plural kubectl's guess
	// would miss (a payload's CRDs); others are guessed.
	Plurals map[schema.GroupKind]string
	// MaxArchiveSize bounds the YAML and JSON an archive may hold;
	// DefaultMaxArchiveSize when zero.
	MaxArchiveSize int64
}

// Gather is an opened must-gather.
type Gather struct {
	fsys fs.FS
	// name is what was opened; images are its image directories, as paths
	// in fsys ("." when it is one).
	name    string
	archive bool
	images  []string
	opts    Options
	lists   map[string]map[string]json.RawMessage // list file -> name -> item
}

// Open opens a must-gather: its root, one of its image directories, or its
// archive (.tar or .tar.gz).
func Open(name string, opts Options) (*Gather, error) {
	if opts.MaxArchiveSize <= 0 {
		opts.MaxArchiveSize = DefaultMaxArchiveSize
	}
	fi, err := os.Stat(name)
	if err != nil {
		return nil, err
	}
	g := &Gather{name: name, opts: opts, lists: map[string]map[string]json.RawMessage{}}
	if fi.IsDir() {
		g.fsys = os.DirFS(name)
	} else if g.fsys, err = readArchive(name, opts.MaxArchiveSize); err != nil {
		return nil, err
	} else {
		g.archive = true
	}
	// An archive usually holds the must-gather's root directory, which
	// holds the image directories: look down two levels.
	for level, dirs := 0, []string{"."}; level < 3 && len(g.images) == 0 && len(dirs) > 0; level++ {
		var next []string
		for _, d := range dirs {
			if g.isImageDir(d) {
				g.images = append(g.images, d)
				continue
			}
			entries, err := fs.ReadDir(g.fsys, d)
			if err != nil {
				return nil, err
			}
			for _, e := range entries {
				if e.IsDir() {
					next = append(next, path.Join(d, e.Name()))
				}
			}
		}
		dirs = next
	}
	if len(g.images) == 0 {
		return nil, fmt.Errorf("%s: not a must-gather: no cluster-scoped-resources/ or namespaces/ in it nor in the directories below it", name)
	}
	return g, nil
}

func (g *Gather) isImageDir(dir string) bool {
	for _, sub := range []string{"cluster-scoped-resources", "namespaces"} {
		if fi, err := fs.Stat(g.fsys, path.Join(dir, sub)); err == nil && fi.IsDir() {
			return true
		}
	}
	return false
}

// Where names what was read: the must-gather and its image directories.
func (g *Gather) Where() string {
	if len(g.images) > 1 {
		return fmt.Sprintf("must-gather %s (image directories %s)", g.name, strings.Join(g.images, ", "))
	}
	if g.images[0] == "." {
		return "must-gather " + g.name
	}
	return "must-gather " + g.path(g.images[0])
}

// resource is the resource name of gk.
func (g *Gather) resource(gk schema.GroupKind) string {
	if plural, ok := g.opts.Plurals[gk]; ok {
		return plural
	}
	plural, _ := meta.UnsafeGuessKindToResource(gk.WithVersion(""))
	return plural.Resource
}

// lookup finds an object in the first image directory that has it: its
// data and the file it is in; when not found, whether its resource was
// collected whole (a list file in some image directory) and the files that
// would have held it.
func (g *Gather) lookup(group, resource, namespace, name string) (data []byte, file string, collected bool, tried []string, err error) {
	groupDir := group
	if groupDir == "" {
		groupDir = "core"
	}
	for _, image := range g.images {
		base := path.Join(image, "cluster-scoped-resources", groupDir)
		if namespace != "" {
			base = path.Join(image, "namespaces", namespace, groupDir)
		}
		own := path.Join(base, resource, name+".yaml")
		switch data, err := fs.ReadFile(g.fsys, own); {
		case err == nil:
			return data, own, true, nil, nil
		case !errors.Is(err, fs.ErrNotExist):
			return nil, own, false, nil, err
		}
		listFile := base + "/" + resource + ".yaml"
		tried = append(tried, own, listFile)
		items, err := g.list(listFile)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			continue
		case err != nil:
			return nil, listFile, false, nil, err
		}
		collected = true
		if item, ok := items[name]; ok {
			return item, listFile, true, nil, nil
		}
	}
	return nil, "", collected, tried, nil
}

// list reads a list file once: a List (its items' missing apiVersion and
// kind are the list's) or a single object.
func (g *Gather) list(p string) (map[string]json.RawMessage, error) {
	if items, ok := g.lists[p]; ok {
		return items, nil
	}
	data, err := fs.ReadFile(g.fsys, p)
	if err != nil {
		return nil, err
	}
	var l struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Items      []json.RawMessage `json:"items"`
	}
	if err := yaml.Unmarshal(data, &l); err != nil {
		return nil, fmt.Errorf("%s: %w", g.path(p), err)
	}
	raw := l.Items
	itemKind, itemVersion := strings.TrimSuffix(l.Kind, "List"), l.APIVersion
	if !strings.HasSuffix(l.Kind, "List") {
		one, err := yaml.YAMLToJSON(data)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", g.path(p), err)
		}
		raw = []json.RawMessage{one}
	}
	items := map[string]json.RawMessage{}
	for i, item := range raw {
		var obj map[string]interface{}
		if err := json.Unmarshal(item, &obj); err != nil {
			return nil, fmt.Errorf("%s: items[%d]: %w", g.path(p), i, err)
		}
		u := unstructured.Unstructured{Object: obj}
		if u.GetName() == "" {
			return nil, fmt.Errorf("%s: items[%d] has no metadata.name", g.path(p), i)
		}
		if u.GetKind() == "" && l.Kind != "List" {
			u.SetKind(itemKind)
			u.SetAPIVersion(itemVersion)
			if item, err = json.Marshal(obj); err != nil {
				return nil, fmt.Errorf("%s: items[%d]: %w", g.path(p), i, err)
			}
		}
		items[u.GetName()] = item
	}
	g.lists[p] = items
	return items, nil
}

// Present looks obj up, and says where the answer comes from (a file, or
// the files that would have held it). A Namespace exists when the
// must-gather inspected it (namespaces/<name>/) or holds it as a
// cluster-scoped object; otherwise it is absent.
func (g *Gather) Present(obj *unstructured.Unstructured) (Presence, string, error) {
	gvk := obj.GroupVersionKind()
	resource := g.resource(gvk.GroupKind())
	isNamespace := gvk.Group == "" && gvk.Kind == "Namespace"
	nsDir := path.Join("namespaces", obj.GetName()) + "/"
	if isNamespace {
		for _, image := range g.images {
			if fi, err := fs.Stat(g.fsys, path.Join(image, nsDir)); err == nil && fi.IsDir() {
				return Present, g.rel(path.Join(image, nsDir)) + "/", nil
			}
		}
	}
	_, file, collected, tried, err := g.lookup(gvk.Group, resource, obj.GetNamespace(), obj.GetName())
	for i := range tried {
		tried[i] = g.rel(tried[i])
	}
	switch {
	case err != nil:
		return Unknown, "", err
	case file != "":
		return Present, g.rel(file), nil
	case isNamespace:
		return Absent, fmt.Sprintf("no %s, %s", nsDir, strings.Join(tried, " nor ")), nil
	case collected:
		return Absent, "not in " + strings.Join(listFiles(tried), " nor "), nil
	default:
		return Unknown, "not collected: no " + strings.Join(tried, " nor "), nil
	}
}

// listFiles are the list files among tried (every second one).
func listFiles(tried []string) []string {
	var out []string
	for i := 1; i < len(tried); i += 2 {
		out = append(out, tried[i])
	}
	return out
}

// path is p as the user would find it on disk: a path, or the archive's
// name and the path in it; error messages name files so.
func (g *Gather) path(p string) string {
	if g.archive {
		return g.name + ":" + p
	}
	return filepath.Join(g.name, filepath.FromSlash(p))
}

// rel is p as the user would find it: within the single image directory,
// or with its image directory when there are several.
func (g *Gather) rel(p string) string {
	if len(g.images) == 1 {
		if r, ok := strings.CutPrefix(p, g.images[0]+"/"); ok {
			return r
		}
	}
	return p
}
