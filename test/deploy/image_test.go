package deploy

import (
	"debug/elf"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"

	"github.com/featuregate-operator/operator/test/framework/harness"
	"github.com/featuregate-operator/operator/test/framework/image"
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
			// The download runs on what is copied so far: a go.mod that
			// replaces a module by a directory not yet copied fails here.
			if stages == 1 && strings.Contains(line, "go mod download") {
				cmd := exec.CommandContext(t.Context(), "go", "mod", "download")
				cmd.Dir = work
				out, err := cmd.CombinedOutput()
				g.Expect(err).NotTo(HaveOccurred(), "%s in the build context so far: %s", line, out)
			}
		}
	}
	g.Expect(build).To(ContainSubstring("CGO_ENABLED=0"), "the build stage's go build")

	out := filepath.Join(t.TempDir(), "manager")
	if err := harness.BuildManagerFrom(t.Context(), work, out); err != nil {
		t.Fatalf("the build context of %s: %v", dockerfile, err)
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

// The image `make test-cluster` runs is built without Docker by
// test/framework/image; it must be the image the Dockerfile describes: the same
// user, entrypoint and exposed ports (which are the Deployment's container
// ports), and nothing in it but the static manager, executable, and the
// user's /etc/passwd and /etc/group entries.
func TestOCIImageMatchesDockerfile(t *testing.T) {
	g := NewWithT(t)
	want := dockerfileContract(t, filepath.Join(root, "Dockerfile"))
	g.Expect(want).To(Equal(image.Operator), "the Dockerfile's final stage and image.Operator")

	archive := filepath.Join(t.TempDir(), "manager.tar")
	const ref = "featuregate-operator:deploy-test"
	g.Expect(image.Write(archive, ref, managerBin, image.Operator)).To(Succeed())
	got, files, err := image.Read(archive, ref)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(want), "the OCI image's config and the Dockerfile")
	// The manager, and the user's entry the runtime reads the group from
	// (the kubelet passes the image's UID alone), as in distroless.
	g.Expect(files).To(Equal([]string{"/etc 0755 0:0", "/etc/group 0644 0:0", "/etc/passwd 0644 0:0", "/manager 0755 0:0"}))

	var dep appsv1.Deployment
	convert(t, find(t, rendered(t), "Deployment", "controller-manager"), &dep)
	var ports []string
	for _, p := range dep.Spec.Template.Spec.Containers[0].Ports {
		ports = append(ports, fmt.Sprintf("%d/%s", p.ContainerPort, strings.ToLower(string(p.Protocol))))
	}
	slices.Sort(ports)
	g.Expect(ports).To(Equal(got.Ports), "the Deployment's container ports and the image's exposed ports")
}

// dockerfileContract reads USER, ENTRYPOINT (exec form) and EXPOSE from
// the final stage of dockerfile.
func dockerfileContract(t *testing.T, dockerfile string) image.Contract {
	t.Helper()
	data, err := os.ReadFile(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	var c image.Contract
	for _, line := range strings.Split(strings.ReplaceAll(string(data), "\\\n", " "), "\n") {
		instr, rest, _ := strings.Cut(strings.TrimSpace(line), " ")
		rest = strings.TrimSpace(rest)
		switch strings.ToUpper(instr) {
		case "FROM": // a new stage starts from nothing
			c = image.Contract{}
		case "USER":
			c.User = rest
		case "ENTRYPOINT":
			c.Entrypoint = nil
			if err := json.Unmarshal([]byte(rest), &c.Entrypoint); err != nil {
				t.Fatalf("%s: ENTRYPOINT %s is not in exec (JSON) form: %v", dockerfile, rest, err)
			}
		case "EXPOSE":
			for _, p := range strings.Fields(rest) {
				if !strings.Contains(p, "/") {
					p += "/tcp"
				}
				c.Ports = append(c.Ports, p)
			}
		}
	}
	slices.Sort(c.Ports)
	return c
}
