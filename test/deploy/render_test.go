package deploy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// The kustomize build of config/default is made once and shared: it is the
// same for every test, and installing kustomize is the slow part.
var (
	renderOnce    sync.Once
	renderedObjs  []*unstructured.Unstructured
	renderErr     error
	kustomizeTemp string
)

// rendered returns the objects of `kustomize build config/default`, with the
// kustomize version the Makefile pins.
func rendered(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	renderOnce.Do(func() { renderedObjs, renderErr = render() })
	if renderErr != nil {
		t.Fatalf("kustomize build config/default: %v", renderErr)
	}
	out := make([]*unstructured.Unstructured, 0, len(renderedObjs))
	for _, o := range renderedObjs {
		out = append(out, o.DeepCopy())
	}
	return out
}

func render() ([]*unstructured.Unstructured, error) {
	bin, err := kustomizeBinary()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "build", filepath.Join(root, "config", "default"))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w\n%s", bin, err, stderr.String())
	}
	return decodeAll(out)
}

// kustomizeBinary is the Makefile's pinned kustomize: bin/kustomize-<version>
// when `make kustomize` installed it, else installed now, through the module
// proxy, into a temporary directory, so that `go test ./...` in a clean
// clone runs too.
func kustomizeBinary() (string, error) {
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		return "", err
	}
	m := regexp.MustCompile(`(?m)^KUSTOMIZE_VERSION \?= (\S+)$`).FindSubmatch(makefile)
	if m == nil {
		return "", errors.New("no KUSTOMIZE_VERSION in the Makefile")
	}
	version := string(m[1])
	pinned := filepath.Join(root, "bin", "kustomize-"+version)
	if _, err := os.Stat(pinned); err == nil {
		return pinned, nil
	}
	if kustomizeTemp, err = os.MkdirTemp("", "featuregate-kustomize-"); err != nil {
		return "", err
	}
	cmd := exec.Command("go", "install", "sigs.k8s.io/kustomize/kustomize/v5@"+version)
	cmd.Dir = kustomizeTemp // outside the module: `go install pkg@version` ignores go.mod
	cmd.Env = append(os.Environ(), "GOBIN="+kustomizeTemp)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install kustomize %s: %w\n%s", version, err, out)
	}
	return filepath.Join(kustomizeTemp, "kustomize"), nil
}

func kustomizeCleanup() {
	if kustomizeTemp != "" {
		os.RemoveAll(kustomizeTemp)
	}
}

// decodeAll splits a multi-document YAML stream into objects.
func decodeAll(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var objs []*unstructured.Unstructured
	for {
		var raw map[string]any
		if err := dec.Decode(&raw); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if raw == nil {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: raw})
	}
}

// find returns the one rendered object of kind whose name ends with suffix
// (the name prefix is kustomize's business, not the test's).
func find(t *testing.T, objs []*unstructured.Unstructured, kind, suffix string) *unstructured.Unstructured {
	t.Helper()
	var found []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind && strings.HasSuffix(o.GetName(), suffix) {
			found = append(found, o)
		}
	}
	if len(found) != 1 {
		t.Fatalf("want one rendered %s named *%s, found %d", kind, suffix, len(found))
	}
	return found[0]
}

// ofKinds returns the rendered objects of the given kinds.
func ofKinds(objs []*unstructured.Unstructured, kinds ...string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		for _, k := range kinds {
			if o.GetKind() == k {
				out = append(out, o)
			}
		}
	}
	return out
}

// convert turns a rendered object into its typed form.
func convert(t *testing.T, u *unstructured.Unstructured, into any) {
	t.Helper()
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(u.Object, into, true); err != nil {
		t.Fatalf("%s %s: %v", u.GetKind(), u.GetName(), err)
	}
}
