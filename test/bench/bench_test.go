package main

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/featuregate-operator/operator/pkg/manifest"
)

func TestPercentile(t *testing.T) {
	g := NewWithT(t)
	ms := func(n ...int) []time.Duration {
		var out []time.Duration
		for _, x := range n {
			out = append(out, time.Duration(x)*time.Millisecond)
		}
		return out
	}
	s := summarize(ms(5, 1, 4, 2, 3))
	g.Expect(s.N).To(Equal(5))
	g.Expect(s.Min).To(Equal(time.Millisecond))
	g.Expect(s.Max).To(Equal(5 * time.Millisecond))
	g.Expect(s.P50).To(Equal(3 * time.Millisecond))
	// rank 0.95*4 = 3.8: between 4 and 5 ms.
	g.Expect(s.P95).To(Equal(4800 * time.Microsecond))
	g.Expect(summarize(ms(7)).P99).To(Equal(7 * time.Millisecond))
	g.Expect(summarize(nil).N).To(BeZero())
}

func TestParseStatCPU(t *testing.T) {
	g := NewWithT(t)
	stat := "1234 (my manager) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 12 0 100 0 0"
	d, err := parseStatCPU(stat)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d).To(Equal(3 * time.Second))
}

// The payload has the shape the report claims: 800 files, a tenth gated
// away from Default, and every file loads.
func TestGeneratePayload(t *testing.T) {
	g := NewWithT(t)
	dir, kdir := t.TempDir(), t.TempDir()
	st, err := generatePayload(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(st.Files).To(Equal(800))
	g.Expect(st.Gated).To(Equal(80))
	for _, k := range []string{"Namespace", "ConfigMap", "ServiceAccount", "Role", "RoleBinding", "Deployment", "CustomResourceDefinition"} {
		g.Expect(st.Kinds).To(HaveKey(k))
	}
	ms, invalid := manifest.Load(dir)
	g.Expect(invalid).To(BeEmpty())
	g.Expect(ms).To(HaveLen(800))
	n, err := copyIncluded(dir, kdir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(720))
	files, _ := filepath.Glob(filepath.Join(kdir, "*.yaml"))
	g.Expect(files).To(HaveLen(720))
	for _, m := range ms {
		g.Expect(manifest.RunLevel(m.File)).NotTo(BeEmpty(), m.File)
	}
}

func TestWriteChart(t *testing.T) {
	g := NewWithT(t)
	path := filepath.Join(t.TempDir(), "c", "chart.png")
	r := &report{Sections: []*section{{Series: []*series{{Short: "a", Values: []time.Duration{time.Millisecond, 3 * time.Millisecond}, Target: 50 * time.Millisecond}}}}}
	g.Expect(writeChart(path, r)).To(Succeed())
	info, err := os.Stat(path)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.Size()).To(BeNumerically(">", 0))
}
