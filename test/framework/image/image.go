// Package image builds container images without Docker: one static binary
// (and the user's /etc/passwd entry) as the whole file system, with the contract the Dockerfile states (user,
// entrypoint, ports), as an archive that `ctr image import` and `docker load`
// read. The image, its layer and the archive are go-containerregistry's; the
// only tar writing is the standard library's tar.Writer.AddFS over a
// directory holding the binary, which keeps its mode.
package image

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Contract is what a container runtime reads from an image's configuration
// and the Dockerfile states: who runs what, listening where.
type Contract struct {
	// Entrypoint is the binary's path in the image and its fixed arguments.
	Entrypoint []string
	// User is "uid:gid".
	User string
	// Ports are "port/protocol", sorted.
	Ports []string
}

// Operator is the manager image's contract, the same as the Dockerfile's
// final stage (distroless/static:nonroot with the binary at /manager): the
// non-root UID and GID 65532, the manager as entrypoint, and the health
// probe (8081) and secured metrics (8443) ports of config/manager.
var Operator = Contract{
	Entrypoint: []string{"/manager"},
	User:       "65532:65532",
	Ports:      []string{"8081/tcp", "8443/tcp"},
}

// Pause is the sandbox image's contract: upstream's pause runs as 65535.
var Pause = Contract{
	Entrypoint: []string{"/pause"},
	User:       "65535:65535",
}

// Build is the image holding binary alone, at c.Entrypoint[0], with c as
// its configuration, for linux on this machine's architecture. The
// manifest, config and layer carry OCI media types.
func Build(binary string, c Contract) (v1.Image, error) {
	if len(c.Entrypoint) == 0 || !strings.HasPrefix(c.Entrypoint[0], "/") {
		return nil, fmt.Errorf("image of %s: entrypoint %q is not an absolute path", binary, c.Entrypoint)
	}
	layerTar, err := layerOf(binary, strings.TrimPrefix(c.Entrypoint[0], "/"), c.User)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("layer of %s: %w", binary, err)
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
	if err != nil {
		return nil, fmt.Errorf("image of %s: %w", binary, err)
	}
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	cfg.Config.Entrypoint = slices.Clone(c.Entrypoint)
	cfg.Config.User = c.User
	cfg.Config.WorkingDir = "/"
	cfg.Config.ExposedPorts = nil
	for _, p := range c.Ports {
		if cfg.Config.ExposedPorts == nil {
			cfg.Config.ExposedPorts = map[string]struct{}{}
		}
		cfg.Config.ExposedPorts[p] = struct{}{}
	}
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return nil, fmt.Errorf("image of %s: config: %w", binary, err)
	}
	return img, nil
}

// layerOf is a tar stream holding binary as path, mode kept, owned by root
// (as the Dockerfile's COPY leaves it), and /etc/passwd and /etc/group
// naming the user, as distroless has them: a kubelet runs the container
// as the image's UID alone, and the runtime takes the group from
// /etc/passwd (without it, group 0).
func layerOf(binary, path, user string) ([]byte, error) {
	data, err := os.ReadFile(binary)
	if err != nil {
		return nil, fmt.Errorf("image binary: %w", err)
	}
	uid, gid, ok := strings.Cut(user, ":")
	if !ok {
		return nil, fmt.Errorf("image of %s: user %q is not uid:gid", binary, user)
	}
	stage, err := os.MkdirTemp("", "featuregate-image-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(stage)
	files := map[string]struct {
		data []byte
		mode os.FileMode
	}{
		path:         {data, 0o755},
		"etc/passwd": {[]byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%s:%s:nonroot:/home/nonroot:/sbin/nologin\n", uid, gid)), 0o644},
		"etc/group":  {[]byte(fmt.Sprintf("root:x:0:\nnonroot:x:%s:\n", gid)), 0o644},
	}
	for name, f := range files {
		target := filepath.Join(stage, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(target, f.data, f.mode); err != nil {
			return nil, err
		}
		// Not as the umask left it.
		if err := os.Chmod(target, f.mode); err != nil {
			return nil, err
		}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.AddFS(os.DirFS(stage)); err != nil {
		return nil, fmt.Errorf("layer of %s: %w", binary, err)
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("layer of %s: %w", binary, err)
	}
	return buf.Bytes(), nil
}

// Write builds the image of binary (Build) and writes it to archive as ref
// ("featuregate-operator:test": a name and tag; docker.io/library/ is what
// container runtimes put before such a name).
func Write(archive, ref, binary string, c Contract) error {
	tag, err := name.NewTag(ref)
	if err != nil {
		return fmt.Errorf("image name %q: %w", ref, err)
	}
	img, err := Build(binary, c)
	if err != nil {
		return err
	}
	if err := tarball.WriteToFile(archive, tag, img); err != nil {
		return fmt.Errorf("write image %s to %s: %w", ref, archive, err)
	}
	return nil
}

// Read is the contract of the image ref in archive, and the paths of the
// files its layers hold.
func Read(archive, ref string) (Contract, []string, error) {
	tag, err := name.NewTag(ref)
	if err != nil {
		return Contract{}, nil, fmt.Errorf("image name %q: %w", ref, err)
	}
	img, err := tarball.ImageFromPath(archive, &tag)
	if err != nil {
		return Contract{}, nil, fmt.Errorf("read image %s from %s: %w", ref, archive, err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return Contract{}, nil, fmt.Errorf("image %s in %s: config: %w", ref, archive, err)
	}
	c := Contract{Entrypoint: cfg.Config.Entrypoint, User: cfg.Config.User}
	for p := range cfg.Config.ExposedPorts {
		c.Ports = append(c.Ports, p)
	}
	slices.Sort(c.Ports)
	files, err := filesOf(img)
	if err != nil {
		return Contract{}, nil, fmt.Errorf("image %s in %s: %w", ref, archive, err)
	}
	return c, files, nil
}

// filesOf lists the paths in the image's flattened file system, with their
// mode ("/manager 0755").
func filesOf(img v1.Image) ([]string, error) {
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	var files []string
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, nil
		}
		if err != nil {
			return nil, err
		}
		files = append(files, fmt.Sprintf("/%s %04o %d:%d", strings.TrimPrefix(h.Name, "./"), h.Mode&0o7777, h.Uid, h.Gid))
	}
}
