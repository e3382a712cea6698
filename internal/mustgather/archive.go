package mustgather

import (
	"archive/tar"
	"bufio"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"time"
)

// DefaultMaxArchiveSize bounds what an archive may hold of the files a
// must-gather reader reads (YAML and JSON), uncompressed: a must-gather of
// a large cluster is hundreds of MiB, and the rest (logs) is skipped.
const DefaultMaxArchiveSize = 2 << 30

// readArchive reads the YAML and JSON files of a .tar or .tar.gz into
// memory, refusing more than limit bytes of them.
func readArchive(name string, limit int64) (fs.FS, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	br := bufio.NewReader(f)
	var r io.Reader = br
	if magic, err := br.Peek(2); err == nil && magic[0] == 0x1f && magic[1] == 0x8b {
		gz, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		defer gz.Close()
		r = gz
	}
	files := memFS{}
	var total int64
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: not a must-gather archive (.tar or .tar.gz): %w", name, err)
		}
		p := path.Clean(strings.TrimPrefix(h.Name, "./"))
		if !fs.ValidPath(p) || p == "." {
			continue // absolute or escaping names are never read
		}
		switch h.Typeflag {
		case tar.TypeDir:
			files.addDir(p)
		case tar.TypeReg:
			files.addDir(path.Dir(p))
			if ext := path.Ext(p); ext != ".yaml" && ext != ".yml" && ext != ".json" {
				continue
			}
			if total += h.Size; total > limit {
				return nil, fmt.Errorf("%s: its YAML and JSON files hold more than the %d-byte limit", name, limit)
			}
			data, err := io.ReadAll(io.LimitReader(tr, h.Size))
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", name, p, err)
			}
			files[p] = &memEntry{data: data}
		}
	}
	return files, nil
}

// memFS is an archive's files and directories, by slash path.
type memFS map[string]*memEntry

type memEntry struct {
	data []byte
	dir  bool
}

func (m memFS) addDir(p string) {
	for ; p != "." && p != "/" && p != ""; p = path.Dir(p) {
		if _, ok := m[p]; ok {
			return
		}
		m[p] = &memEntry{dir: true}
	}
}

func (m memFS) lookup(op, name string) (*memEntry, error) {
	if name == "." {
		return &memEntry{dir: true}, nil
	}
	e, ok := m[name]
	if !ok || !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: op, Path: name, Err: fs.ErrNotExist}
	}
	return e, nil
}

func (m memFS) Open(name string) (fs.File, error) {
	e, err := m.lookup("open", name)
	if err != nil {
		return nil, err
	}
	return &memFile{name: name, entry: e, r: strings.NewReader(string(e.data))}, nil
}

func (m memFS) ReadFile(name string) ([]byte, error) {
	e, err := m.lookup("read", name)
	if err != nil {
		return nil, err
	}
	if e.dir {
		return nil, &fs.PathError{Op: "read", Path: name, Err: errors.New("is a directory")}
	}
	return e.data, nil
}

func (m memFS) Stat(name string) (fs.FileInfo, error) {
	e, err := m.lookup("stat", name)
	if err != nil {
		return nil, err
	}
	return memInfo{name: path.Base(name), entry: e}, nil
}

func (m memFS) ReadDir(name string) ([]fs.DirEntry, error) {
	if _, err := m.lookup("readdir", name); err != nil {
		return nil, err
	}
	prefix := name + "/"
	if name == "." {
		prefix = ""
	}
	var out []fs.DirEntry
	for p, e := range m {
		if rest, ok := strings.CutPrefix(p, prefix); ok && rest != "" && !strings.Contains(rest, "/") {
			out = append(out, fs.FileInfoToDirEntry(memInfo{name: rest, entry: e}))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out, nil
}

type memFile struct {
	name  string
	entry *memEntry
	r     *strings.Reader
}

func (f *memFile) Stat() (fs.FileInfo, error) {
	return memInfo{name: path.Base(f.name), entry: f.entry}, nil
}
func (f *memFile) Read(b []byte) (int, error) { return f.r.Read(b) }
func (f *memFile) Close() error               { return nil }

type memInfo struct {
	name  string
	entry *memEntry
}

func (i memInfo) Name() string       { return i.name }
func (i memInfo) Size() int64        { return int64(len(i.entry.data)) }
func (i memInfo) ModTime() time.Time { return time.Time{} }
func (i memInfo) IsDir() bool        { return i.entry.dir }
func (i memInfo) Sys() any           { return nil }
func (i memInfo) Mode() fs.FileMode {
	if i.entry.dir {
		return fs.ModeDir | 0o555
	}
	return 0o444
}
