package featuregate

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	configv1 "github.com/openshift/api/config/v1"
	"go.uber.org/goleak"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"
)

// fileGate is a complete FeatureGate, spec and status, as a file holds it.
func fileGate(set configv1.FeatureSet, enabled ...configv1.FeatureGateName) *configv1.FeatureGate {
	details := configv1.FeatureGateDetails{
		Version:  "4.22.0",
		Enabled:  []configv1.FeatureGateAttributes{},
		Disabled: []configv1.FeatureGateAttributes{{Name: "Off"}},
	}
	for _, name := range enabled {
		details.Enabled = append(details.Enabled, configv1.FeatureGateAttributes{Name: name})
	}
	return &configv1.FeatureGate{
		TypeMeta:   metav1.TypeMeta{APIVersion: configv1.GroupVersion.String(), Kind: "FeatureGate"},
		ObjectMeta: metav1.ObjectMeta{Name: "cluster"},
		Spec:       configv1.FeatureGateSpec{FeatureGateSelection: configv1.FeatureGateSelection{FeatureSet: set}},
		Status:     configv1.FeatureGateStatus{FeatureGates: []configv1.FeatureGateDetails{details}},
	}
}

func fileYAML(t *testing.T, fg *configv1.FeatureGate) []byte {
	t.Helper()
	data, err := yaml.Marshal(fg)
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func fileWrite(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// fileTestSource follows path by its events only (the re-read is an hour
// away), and trusts a file 10 ms after it was written.
func fileTestSource(path string) *fileSource {
	s := newFileSource(path, time.Hour, 0)
	s.settle = 10 * time.Millisecond
	return s
}

func fileContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// fileFollower runs follow in the background and records what it calls.
type fileFollower struct {
	following chan struct{}              // closed by following
	seen      chan *configv1.FeatureGate // what seen was given
	done      chan struct{}              // closed when follow returned err
	err       error

	mu    sync.Mutex
	calls []string // "following" and "seen", in order
}

// fileStartFollow starts s.follow(from); seen answers stop. The test ends
// with follow stopped and no goroutine left behind.
func fileStartFollow(t *testing.T, ctx context.Context, s *fileSource, from *configv1.FeatureGate, stop bool) *fileFollower {
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, ignore) }) // runs after the cleanup below
	ctx, cancel := context.WithCancel(ctx)
	f := &fileFollower{following: make(chan struct{}), seen: make(chan *configv1.FeatureGate, 100), done: make(chan struct{})}
	go func() {
		defer close(f.done)
		f.err = s.follow(ctx, from, func() {
			f.call("following")
			close(f.following)
		}, func(fg *configv1.FeatureGate) bool {
			f.call("seen")
			select {
			case f.seen <- fg:
			case <-ctx.Done():
			}
			return stop
		})
	}()
	t.Cleanup(func() {
		cancel()
		select {
		case <-f.done:
		case <-time.After(10 * time.Second):
			t.Error("follow did not return after its context ended")
		}
	})
	return f
}

func (f *fileFollower) call(name string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, name)
}

func (f *fileFollower) callOrder() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

// fileVolume lays dir out as the kubelet lays out a ConfigMap volume with
// the key featuregate.yaml, and returns the key's path.
func fileVolume(t *testing.T, dir, version string, data []byte) string {
	t.Helper()
	if err := os.Mkdir(filepath.Join(dir, version), 0o755); err != nil {
		t.Fatal(err)
	}
	fileWrite(t, filepath.Join(dir, version, "featuregate.yaml"), data)
	for _, link := range [][2]string{{version, "..data"}, {"..data/featuregate.yaml", "featuregate.yaml"}} {
		if err := os.Symlink(link[0], filepath.Join(dir, link[1])); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(dir, "featuregate.yaml")
}

// fileSwap updates a ConfigMap volume the kubelet's way: the new version in
// a new directory, ..data switched to it by a rename, the old one removed.
func fileSwap(t *testing.T, dir, from, to string, data []byte) {
	t.Helper()
	if err := os.Mkdir(filepath.Join(dir, to), 0o755); err != nil {
		t.Fatal(err)
	}
	fileWrite(t, filepath.Join(dir, to, "featuregate.yaml"), data)
	if err := os.Symlink(to, filepath.Join(dir, "..data_tmp")); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "..data_tmp"), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, from)); err != nil {
		t.Fatal(err)
	}
}

func TestFileSourceReadsYAMLAndJSON(t *testing.T) {
	g := NewWithT(t)
	ctx := fileContext(t)
	want := fileGate(configv1.TechPreviewNoUpgrade, "A", "B")
	asJSON, err := json.Marshal(want)
	g.Expect(err).NotTo(HaveOccurred())
	for name, data := range map[string][]byte{"featuregate.yaml": fileYAML(t, want), "featuregate.json": asJSON} {
		path := filepath.Join(t.TempDir(), name)
		fileWrite(t, path, data)
		got, err := fileTestSource(path).read(ctx)
		g.Expect(err).NotTo(HaveOccurred(), name)
		g.Expect(got).To(Equal(want), name)
	}
}

func TestFileSourceReadErrorsNameTheFile(t *testing.T) {
	ctx := fileContext(t)
	full := fileYAML(t, fileGate(configv1.Default))
	for _, tc := range []struct {
		name    string
		data    []byte // nil: no file
		maxSize int64
		want    string
	}{
		{name: "missing", want: "no such file or directory"},
		{name: "empty", data: []byte("\n"), want: "empty"},
		{name: "not YAML", data: []byte("spec: [featureSet\n"), want: "not a YAML or JSON object"},
		{name: "not an object", data: []byte("just words\n"), want: "not a YAML or JSON object"},
		{name: "wrong kind", data: []byte("apiVersion: v1\nkind: ConfigMap\ndata:\n  featureSet: TechPreviewNoUpgrade\n"), want: `is not a FeatureGate: kind is "ConfigMap"`},
		{name: "wrong apiVersion", data: []byte("apiVersion: config.openshift.io/v2\nkind: FeatureGate\n"), want: `apiVersion is "config.openshift.io/v2", want FeatureGate, config.openshift.io/v1`},
		{name: "too large", data: full, maxSize: 64, want: "larger than the 64-byte limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "featuregate.yaml")
			if tc.data != nil {
				fileWrite(t, path, tc.data)
			}
			s := fileTestSource(path)
			if tc.maxSize != 0 {
				s.maxSize = tc.maxSize
			}
			fg, err := s.read(ctx)
			g := NewWithT(t)
			g.Expect(fg).To(BeNil())
			g.Expect(err).To(MatchError(And(HavePrefix("read FeatureGate file "+path+": "), ContainSubstring(tc.want))))
		})
	}
}

func TestFileSourceMissingFileIsNotExist(t *testing.T) {
	path := filepath.Join(t.TempDir(), "featuregate.yaml")
	_, err := fileTestSource(path).read(fileContext(t))
	NewWithT(t).Expect(errors.Is(err, fs.ErrNotExist)).To(BeTrue(), "%v", err)
}

// The kubelet updates a ConfigMap volume by switching the ..data symlink
// and deleting the old version's directory; each update is seen, not just
// the first (a watch on the file itself ends with the file it watched).
func TestFileSourceFollowsConfigMapVolumeSwaps(t *testing.T) {
	g := NewWithT(t)
	ctx := fileContext(t)
	dir := t.TempDir()
	versions := []string{"..2026_01_01_00_00_00.000", "..2026_01_01_00_01_00.000", "..2026_01_01_00_02_00.000"}
	gates := []*configv1.FeatureGate{fileGate(configv1.Default), fileGate(configv1.TechPreviewNoUpgrade), fileGate(configv1.TechPreviewNoUpgrade, "New")}
	path := fileVolume(t, dir, versions[0], fileYAML(t, gates[0]))
	s := fileTestSource(path)
	from, err := s.read(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(from).To(Equal(gates[0]))

	f := fileStartFollow(t, ctx, s, from, false)
	g.Eventually(f.following).WithTimeout(10 * time.Second).Should(BeClosed())
	for i := 1; i < len(versions); i++ {
		fileSwap(t, dir, versions[i-1], versions[i], fileYAML(t, gates[i]))
		var got *configv1.FeatureGate
		g.Eventually(f.seen).WithTimeout(10*time.Second).Should(Receive(&got), "update %d", i)
		g.Expect(got).To(Equal(gates[i]))
	}
	g.Expect(f.done).NotTo(BeClosed(), "seen answered false: follow goes on")
}

func TestFileSourceFollowsAnInPlaceRewrite(t *testing.T) {
	g := NewWithT(t)
	ctx := fileContext(t)
	path := filepath.Join(t.TempDir(), "featuregate.yaml")
	old := fileGate(configv1.Default)
	fileWrite(t, path, fileYAML(t, old))
	s := fileTestSource(path)
	from, err := s.read(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	// The same FeatureGate, re-rendered with other metadata, before follow
	// starts (so that its first read surely sees it): not a change.
	same := old.DeepCopy()
	same.Annotations = map[string]string{"rendered": "again"}
	same.ResourceVersion = "2"
	fileWrite(t, path, fileYAML(t, same))

	f := fileStartFollow(t, ctx, s, from, false)
	g.Eventually(f.following).WithTimeout(10 * time.Second).Should(BeClosed())
	next := fileGate(configv1.Default, "New")
	fileWrite(t, path, fileYAML(t, next)) // truncates, then writes
	var got *configv1.FeatureGate
	g.Eventually(f.seen).WithTimeout(10 * time.Second).Should(Receive(&got))
	g.Expect(got).To(Equal(next), "the first state reported is the change, whole")
	g.Expect(f.done).NotTo(BeClosed(), "seen answered false: follow goes on")
}

// A file written in place can be read half written, and its prefix may be
// a FeatureGate; read must not return it while the file is younger than
// settle. Without the settle rule the first read below returns the prefix.
func TestFileSourceNeverReturnsAHalfWrittenFile(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "featuregate.yaml")
	full := fileYAML(t, fileGate(configv1.TechPreviewNoUpgrade, "A"))
	cut := strings.Index(string(full), "\nstatus:") + 1
	g.Expect(cut).To(BeNumerically(">", 0))
	prefix := full[:cut]
	_, err := fileDecode(path, prefix)
	g.Expect(err).NotTo(HaveOccurred(), "the prefix is a FeatureGate by itself")

	fileWrite(t, path, prefix)
	s := fileTestSource(path)
	s.settle = time.Hour // the prefix stays younger than settle throughout
	young, cancel := context.WithTimeout(fileContext(t), 200*time.Millisecond)
	defer cancel()
	fg, err := s.read(young)
	g.Expect(fg).To(BeNil(), "read returned a half-written file")
	g.Expect(err).To(MatchError(And(ContainSubstring(path), ContainSubstring("still being written"))))

	// The writer finishes; once it has settled, the whole file is read.
	file, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	g.Expect(err).NotTo(HaveOccurred())
	_, err = file.Write(full[cut:])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(file.Close()).To(Succeed())
	s.settle = 10 * time.Millisecond
	fg, err = s.read(fileContext(t))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fg).To(Equal(fileGate(configv1.TechPreviewNoUpgrade, "A")))
}

// An mtime in the future (a skewed clock, a copied timestamp) never ages
// into settle; two identical reads settle apart trust the file instead.
func TestFileSourceSettlesAFileFromTheFuture(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "featuregate.yaml")
	fileWrite(t, path, fileYAML(t, fileGate(configv1.Default)))
	future := time.Now().Add(time.Hour)
	g.Expect(os.Chtimes(path, future, future)).To(Succeed())
	fg, err := fileTestSource(path).read(fileContext(t))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fg).To(Equal(fileGate(configv1.Default)))
}

func TestFileSourceFollowFailsWhenTheFileVanishes(t *testing.T) {
	g := NewWithT(t)
	ctx := fileContext(t)
	path := filepath.Join(t.TempDir(), "featuregate.yaml")
	data := fileYAML(t, fileGate(configv1.Default))
	fileWrite(t, path, data)
	s := fileTestSource(path)
	from, err := s.read(ctx)
	g.Expect(err).NotTo(HaveOccurred())

	f := fileStartFollow(t, ctx, s, from, false)
	g.Eventually(f.following).WithTimeout(10 * time.Second).Should(BeClosed())
	g.Expect(os.Remove(path)).To(Succeed())
	g.Eventually(f.done).WithTimeout(10 * time.Second).Should(BeClosed())
	g.Expect(f.err).To(MatchError(ContainSubstring("read FeatureGate file " + path + ": no such file or directory")))
	g.Expect(errors.Is(f.err, fs.ErrNotExist)).To(BeTrue())
	g.Expect(f.seen).NotTo(Receive())

	// The file comes back: the guard's next read succeeds.
	fileWrite(t, path, data)
	fg, err := s.read(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fg).To(Equal(from))
}

func TestFileSourceFollowReportsAChangeMadeBeforeItStarted(t *testing.T) {
	g := NewWithT(t)
	ctx := fileContext(t)
	path := filepath.Join(t.TempDir(), "featuregate.yaml")
	fileWrite(t, path, fileYAML(t, fileGate(configv1.Default)))
	s := fileTestSource(path)
	from, err := s.read(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	// Changed after the read, before the watch: no event will tell.
	next := fileGate(configv1.Default, "New")
	fileWrite(t, path, fileYAML(t, next))

	f := fileStartFollow(t, ctx, s, from, true)
	var got *configv1.FeatureGate
	g.Eventually(f.seen).WithTimeout(10 * time.Second).Should(Receive(&got))
	g.Expect(got).To(Equal(next))
	g.Eventually(f.done).WithTimeout(10 * time.Second).Should(BeClosed())
	g.Expect(f.err).NotTo(HaveOccurred())
	g.Expect(f.callOrder()).To(Equal([]string{"following", "seen"}))
}

// The periodic read catches what no event reports: here the path is a
// symlink into a directory follow does not watch.
func TestFileSourceFollowRereadsWithoutEvents(t *testing.T) {
	g := NewWithT(t)
	ctx := fileContext(t)
	target := filepath.Join(t.TempDir(), "real.yaml")
	fileWrite(t, target, fileYAML(t, fileGate(configv1.Default)))
	path := filepath.Join(t.TempDir(), "featuregate.yaml")
	g.Expect(os.Symlink(target, path)).To(Succeed())
	s := fileTestSource(path)
	s.reread = 50 * time.Millisecond
	from, err := s.read(ctx)
	g.Expect(err).NotTo(HaveOccurred())

	f := fileStartFollow(t, ctx, s, from, true)
	g.Eventually(f.following).WithTimeout(10 * time.Second).Should(BeClosed())
	next := fileGate(configv1.DevPreviewNoUpgrade)
	fileWrite(t, target, fileYAML(t, next))
	var got *configv1.FeatureGate
	g.Eventually(f.seen).WithTimeout(10 * time.Second).Should(Receive(&got))
	g.Expect(got).To(Equal(next))
}

func TestFileSourceFollowReturnsNilWhenCancelled(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(fileContext(t))
	defer cancel()
	path := filepath.Join(t.TempDir(), "featuregate.yaml")
	fileWrite(t, path, fileYAML(t, fileGate(configv1.Default)))
	past := time.Now().Add(-time.Hour)
	g.Expect(os.Chtimes(path, past, past)).To(Succeed())
	s := fileTestSource(path)
	s.settle = time.Hour // only the file written below is too young
	from, err := s.read(ctx)
	g.Expect(err).NotTo(HaveOccurred())

	f := fileStartFollow(t, ctx, s, from, false)
	g.Eventually(f.following).WithTimeout(10 * time.Second).Should(BeClosed())
	// A change that will not settle for an hour: follow is likely waiting
	// on it when the context ends, and must not go on waiting.
	fileWrite(t, path, fileYAML(t, fileGate(configv1.Default, "New")))
	cancel()
	g.Eventually(f.done).WithTimeout(2 * time.Second).Should(BeClosed())
	g.Expect(f.err).NotTo(HaveOccurred())
	g.Expect(f.seen).NotTo(Receive())
}
