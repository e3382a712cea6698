package featuregate

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
	configv1 "github.com/openshift/api/config/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

const (
	// fileDefaultMaxSize bounds a read: a FeatureGate is a few kilobytes,
	// and the path may name anything, /dev/zero included.
	fileDefaultMaxSize = 1 << 20
	// fileDefaultReread is how often follow reads the file even without an
	// event, to bound how late a missed event is noticed.
	fileDefaultReread = 10 * time.Second
	// fileDefaultSettle is how long the file must have been left alone
	// before a read of it is trusted; see fileSource.
	fileDefaultSettle = 100 * time.Millisecond
)

// fileSource reads the FeatureGate from a YAML or JSON file: on HyperShift
// the FeatureGate rendered into a ConfigMap mounted in the pod, on
// MicroShift (which serves no FeatureGate API) a file put there.
//
// A result of read is never a torn file. A ConfigMap volume is safe by
// construction: the kubelet writes each version into a new timestamped
// directory and switches the ..data symlink to it with one rename, so a
// read through the path sees one version or the other. A file rewritten in
// place is not: a read can catch it half written, and a prefix of a
// FeatureGate is often a valid FeatureGate (the spec without the status)
// that would silently become the startup snapshot. So read trusts what it
// read only when both hold:
//
//   - the file was the same file, of the same size and mtime, just before
//     and just after the read (otherwise it was replaced or written during
//     the read);
//   - it had been left alone for settle: its mtime is at least settle old,
//     or two reads settle apart found it unchanged (so that a file whose
//     mtime is in the future, from a skewed clock or a copied timestamp,
//     still settles).
//
// Otherwise it waits settle and reads again, for as long as ctx allows: a
// file that keeps changing is never trusted. A writer that pauses for
// longer than settle in the middle of the file defeats the rule, and so
// does a filesystem whose mtimes are coarse (tmpfs, where ConfigMap
// volumes live, ext4 and xfs keep nanoseconds); only an atomic replacement
// (write elsewhere, then rename) rules those out.
type fileSource struct {
	path    string
	reread  time.Duration
	maxSize int64
	// settle is how long the file must have been unmodified before a read
	// of it is trusted.
	settle time.Duration
}

var _ source = (*fileSource)(nil)

// newFileSource reads the FeatureGate at path, and follows it with a
// directory watch plus a read every reread. reread <= 0 and maxSize <= 0
// mean the defaults (10 s, 1 MiB).
func newFileSource(path string, reread time.Duration, maxSize int64) *fileSource {
	if reread <= 0 {
		reread = fileDefaultReread
	}
	if maxSize <= 0 {
		maxSize = fileDefaultMaxSize
	}
	return &fileSource{path: filepath.Clean(path), reread: reread, maxSize: maxSize, settle: fileDefaultSettle}
}

// fileRead is one untorn read of the file: its bytes, its identity
// throughout the read, and when the read ended.
type fileRead struct {
	data []byte
	info os.FileInfo
	at   time.Time
}

// reconnect has nothing to drop: each read opens the file.
func (s *fileSource) reconnect() {}

// read returns the FeatureGate in the file once the file is settled (see
// fileSource). Its errors name the file.
func (s *fileSource) read(ctx context.Context) (*configv1.FeatureGate, error) {
	var prev *fileRead
	for {
		r, err := s.readOnce()
		if err != nil {
			return nil, err
		}
		if r != nil && s.settled(prev, r) {
			return fileDecode(s.path, r.data)
		}
		if r != nil {
			prev = r
		}
		t := time.NewTimer(s.settle)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("read FeatureGate file %s: still being written (it must be unchanged for %s): %w", s.path, s.settle, context.Cause(ctx))
		case <-t.C:
		}
	}
}

// readOnce reads the file between two stats, and returns nil when they
// differ: the file changed during the read.
func (s *fileSource) readOnce() (*fileRead, error) {
	before, err := os.Stat(s.path)
	if err != nil {
		return nil, s.fileError(err)
	}
	data, err := readAtMost(s.path, s.maxSize)
	if err != nil {
		return nil, s.fileError(err)
	}
	after, err := os.Stat(s.path)
	if err != nil {
		return nil, s.fileError(err)
	}
	if !fileUnchanged(before, after) {
		return nil, nil
	}
	return &fileRead{data: data, info: after, at: time.Now()}, nil
}

// settled says whether r may be trusted: the file had been left alone for
// settle before r, by its mtime or by prev, an identical earlier read.
func (s *fileSource) settled(prev, r *fileRead) bool {
	if r.at.Sub(r.info.ModTime()) >= s.settle {
		return true
	}
	return prev != nil && r.at.Sub(prev.at) >= s.settle &&
		fileUnchanged(prev.info, r.info) && bytes.Equal(prev.data, r.data)
}

// fileUnchanged says whether a and b, two stats of one path, are the same
// file with the same size and mtime.
func fileUnchanged(a, b os.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

// errTooLarge is a file past maxSize.
var errTooLarge = errors.New("too large")

// readAtMost reads the whole file, or fails with errTooLarge once it has
// read more than limit bytes (from a file that grew, or /dev/zero).
func readAtMost(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, errTooLarge
	}
	return data, nil
}

// fileError names the file once: os errors name it too.
func (s *fileSource) fileError(err error) error {
	var pathErr *fs.PathError
	switch {
	case errors.Is(err, errTooLarge):
		return fmt.Errorf("read FeatureGate file %s: larger than the %d-byte limit", s.path, s.maxSize)
	case errors.As(err, &pathErr):
		err = pathErr.Err // keeps errors.Is(err, fs.ErrNotExist)
	}
	return fmt.Errorf("read FeatureGate file %s: %w", s.path, err)
}

// fileDecode decodes a FeatureGate document, YAML or JSON. It insists on
// the apiVersion and kind, so that a wrong file (a ConfigMap, another
// config) is refused rather than read as an empty FeatureGate, but not on
// the fields: like the API source, it ignores fields this build does not
// know, so that a newer FeatureGate schema still reads.
func fileDecode(path string, data []byte) (*configv1.FeatureGate, error) {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil, fmt.Errorf("read FeatureGate file %s: empty", path)
	}
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(data, &tm); err != nil {
		return nil, fmt.Errorf("read FeatureGate file %s: not a YAML or JSON object: %w", path, err)
	}
	if want := configv1.GroupVersion.String(); tm.Kind != "FeatureGate" || tm.APIVersion != want {
		return nil, fmt.Errorf("read FeatureGate file %s: is not a FeatureGate: kind is %q, apiVersion is %q, want FeatureGate, %s", path, tm.Kind, tm.APIVersion, want)
	}
	fg := &configv1.FeatureGate{}
	if err := yaml.Unmarshal(data, fg); err != nil {
		return nil, fmt.Errorf("read FeatureGate file %s: %w", path, err)
	}
	return fg, nil
}

// follow watches the file's directory, not the file. A watch on the file
// watches the inode the path led to when the watch was added; a ConfigMap
// volume changes by renaming the ..data symlink in that directory to a new
// version, and deletes the old one, so such a watch ends with the first
// update and misses the next. A file replaced by a rename is a new inode
// as well. It also reads every reread, because inotify drops events when its queue
// overflows, and some filesystems (network ones, FUSE) report no changes
// made elsewhere.
//
// It reports a FeatureGate to seen only when its spec or status differ
// from the last one reported (from, at first), compared semantically:
// those are all the guard compares, and a rewrite that changes only the
// formatting or the metadata (a re-render with a new resourceVersion) is
// the same FeatureGate, not a state worth reporting.
func (s *fileSource) follow(ctx context.Context, from *configv1.FeatureGate, following func(), seen func(*configv1.FeatureGate) bool) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch FeatureGate file %s: %w", s.path, err)
	}
	defer w.Close() // waits for the watcher's goroutine to end
	dir := filepath.Dir(s.path)
	if err := w.Add(dir); err != nil {
		return fmt.Errorf("watch FeatureGate file %s: directory %s: %w", s.path, dir, err)
	}
	tick := time.NewTicker(s.reread)
	defer tick.Stop()

	// The watch reports changes from now on; this read catches any made
	// between from's read and the watch. Only then is follow certain.
	fg, err := s.read(ctx)
	if err != nil {
		return fileLost(ctx, err)
	}
	following()
	last := from
	for {
		if !fileSameGate(last, fg) {
			if seen(fg) {
				return nil
			}
			last = fg
		}
		if err := s.await(ctx, w, tick.C); err != nil || ctx.Err() != nil {
			return err
		}
		if fg, err = s.read(ctx); err != nil {
			return fileLost(ctx, err)
		}
	}
}

// await returns when the file may have changed: an event names it, the
// ..data symlink or the directory itself, or tick fires; or when ctx ends.
// It fails when the watch does.
func (s *fileSource) await(ctx context.Context, w *fsnotify.Watcher, tick <-chan time.Time) error {
	dir := filepath.Dir(s.path)
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-tick:
			return nil
		case ev, ok := <-w.Events:
			if !ok {
				return fmt.Errorf("watch FeatureGate file %s: the watch ended", s.path)
			}
			switch filepath.Clean(ev.Name) {
			case s.path, filepath.Join(dir, "..data"), dir:
				return nil
			}
		case err, ok := <-w.Errors:
			if !ok {
				return fmt.Errorf("watch FeatureGate file %s: the watch ended", s.path)
			}
			return fmt.Errorf("watch FeatureGate file %s: %w", s.path, err)
		}
	}
}

// fileLost is follow's answer to a failed read: nil when ctx ended (the
// read failed for that), the read's error otherwise.
func fileLost(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return nil
	}
	return err
}

// fileSameGate says whether a and b hold the same spec and status.
func fileSameGate(a, b *configv1.FeatureGate) bool {
	return a != nil && b != nil &&
		apiequality.Semantic.DeepEqual(a.Spec, b.Spec) &&
		apiequality.Semantic.DeepEqual(a.Status, b.Status)
}
