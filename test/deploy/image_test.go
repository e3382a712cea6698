package deploy

import (
	"debug/elf"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

// The image's base, distroless/static, has no dynamic loader and no libc:
// the binary must be static. That is what CGO_ENABLED=0 buys; check it on the
// binary every other test runs.
func TestManagerBinaryIsStatic(t *testing.T) {
	checkStatic(t, managerBin)
}

// The Dockerfile's build stage, run without Docker: the files its COPY
// instructions put into the build context (less what .dockerignore keeps
// out: testdata) are enough to build the manager with the stage's
// CGO_ENABLED=0 go build, and the result is static.
func TestDockerfileBuildStage(t *testing.T) {
	checkStatic(t, buildStage(t, filepath.Join(root, "Dockerfile")))
}

// buildStage builds the manager from the build context the first stage of
// dockerfile copies, and returns the binary.
func buildStage(t *testing.T, dockerfile string) string {
	t.Helper()
	g := NewWithT(t)
	data, err := os.ReadFile(dockerfile)
	g.Expect(err).NotTo(HaveOccurred())

	work := t.TempDir()
	var build string
	stages := 0
	// Instructions continue over lines ending in a backslash.
	joined := strings.ReplaceAll(string(data), "\\\n", " ")
	for _, line := range strings.Split(joined, "\n") {
		fields := strings.Fields(line)
		if len(fields) == 0 || strings.HasPrefix(fields[0], "#") {
			continue
		}
		switch strings.ToUpper(fields[0]) {
		case "FROM":
			stages++
		case "COPY":
			if stages != 1 || strings.HasPrefix(fields[1], "--") {
				continue // the runtime stage copies from the builder
			}
			g.Expect(fields).To(HaveLen(3), "COPY with one source: %q", line)
			copyInto(t, filepath.Join(root, fields[1]), filepath.Join(work, fields[2]))
		case "RUN":
			if stages == 1 && strings.Contains(line, "go build") {
				build = line
			}
		}
	}
	g.Expect(build).To(ContainSubstring("CGO_ENABLED=0"), "the build stage's go build")

	out := filepath.Join(t.TempDir(), "manager")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", out, ".")
	cmd.Dir = work
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if output, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build in the build context of %s: %v\n%s", dockerfile, err, output)
	}
	return out
}

// copyInto copies a file, or a directory tree without testdata, as COPY does.
func copyInto(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			if d.Name() == "testdata" {
				return filepath.SkipDir // .dockerignore: **/testdata/
			}
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatalf("COPY %s: %v", src, err)
	}
}

// checkStatic fails unless path is an ELF executable with no program
// interpreter (dynamic loader) and no shared libraries.
func checkStatic(t *testing.T, path string) {
	t.Helper()
	g := NewWithT(t)
	f, err := elf.Open(path)
	g.Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	for _, p := range f.Progs {
		g.Expect(p.Type).NotTo(Equal(elf.PT_INTERP), "%s has a program interpreter: it is dynamically linked", path)
	}
	libs, err := f.ImportedLibraries()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(libs).To(BeEmpty(), "%s needs shared libraries", path)
}
