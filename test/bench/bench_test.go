package main

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	dto "github.com/prometheus/client_model/go"
	"gonum.org/v1/plot/plotutil"
	"google.golang.org/protobuf/proto"

	"github.com/featuregate-operator/operator/pkg/manifest"
	"github.com/featuregate-operator/operator/test/framework/harness"
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
	d, err := harness.ParseStatCPU(stat)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(d).To(Equal(3 * time.Second))
}

// The payload has the shape the report claims: 800 files, a tenth gated
// away from Default, and every file loads.
func TestGeneratePayload(t *testing.T) {
	g := NewWithT(t)
	dir, kdir := t.TempDir(), t.TempDir()
	st, err := generatePayload(dir, payloadComponents)
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
		g.Expect(m.File).To(MatchRegexp(`^0000_\d\d_`), "a run level in the name, as Groups orders by")
	}
}

// The chart of a report: a PNG as tall as its rows, with the targets in
// red, and no file at all when nothing can be drawn.
func TestWriteChart(t *testing.T) {
	g := NewWithT(t)
	ms := func(n ...float64) []time.Duration {
		var out []time.Duration
		for _, x := range n {
			out = append(out, time.Duration(x*float64(time.Millisecond)))
		}
		return out
	}
	sample := func(target time.Duration) *report {
		return &report{Machine: machine{CPUs: 2, LoadBefore: "0.1 0.2 0.3"}, Started: time.Now(), Sections: []*section{
			{Series: []*series{
				{Short: "change: process", Values: ms(4.1, 3.9, 4.4, 6, 4.2), Target: target},
				{Short: "change: floor", Values: ms(3.7, 3.5, 3.9)},
				{Short: "left out", Values: ms(-1, 2), NoChart: true},
				{Short: "no runs"},
			}},
			{Series: []*series{{Short: "apply: kubectl", Values: ms(3380, 3100, 4000), Target: target}}},
			{Series: []*series{{Short: "a zero run", Values: ms(0, 0.5)}}},
		}}
	}
	dir := t.TempDir()
	render := func(name string, r *report) image.Image {
		path := filepath.Join(dir, name, "latency.png")
		g.Expect(writeChart(path, r)).To(Succeed())
		f, err := os.Open(path)
		g.Expect(err).NotTo(HaveOccurred(), "writeChart wrote no file for a report with series")
		defer f.Close()
		img, err := png.Decode(f)
		g.Expect(err).NotTo(HaveOccurred())
		return img
	}
	img := render("full", sample(50*time.Millisecond))
	b := img.Bounds()
	g.Expect(b.Dx()).To(BeNumerically(">=", 800))
	g.Expect(b.Dy()).To(BeNumerically(">=", 300))
	g.Expect(countColor(img, targetRed)).To(BeNumerically(">", 20), "the target is drawn")
	g.Expect(countColor(render("no-target", sample(0)), targetRed)).To(BeZero())

	more := sample(0)
	for i := range 10 {
		more.Sections[0].Series = append(more.Sections[0].Series, &series{Short: fmt.Sprintf("row %d", i), Values: ms(float64(i + 1))})
	}
	g.Expect(render("more", more).Bounds().Dy()).To(BeNumerically(">", b.Dy()+100), "one row per series")

	for name, r := range map[string]*report{
		"empty":   {},
		"nothing": {Sections: []*section{{Series: []*series{{Short: "x", Values: ms(1), NoChart: true}, {Short: "y"}}}}},
	} {
		path := filepath.Join(dir, name, "latency.png")
		g.Expect(writeChart(path, r)).To(Succeed())
		g.Expect(path).NotTo(BeAnExistingFile(), name)
	}
}

func TestLineChart(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	lines := []line{
		{Name: "operator", Points: [][2]float64{{100, 0.4}, {800, 3.0}, {200, 0.7}, {400, 1.5}}},
		{Name: "kubectl apply", Points: [][2]float64{{100, 0.6}, {200, 1.1}, {400, 2.0}, {800, 3.4}}},
		{Name: "not measured"},
	}
	for _, log := range []bool{false, true} {
		path := filepath.Join(dir, fmt.Sprint(log), "lines.png")
		g.Expect(writeLineChart(path, "apply", "manifests", "seconds", log, log, lines)).To(Succeed())
		f, err := os.Open(path)
		g.Expect(err).NotTo(HaveOccurred())
		img, err := png.Decode(f)
		f.Close()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(img.Bounds().Dx()).To(BeNumerically(">=", 600))
		g.Expect(img.Bounds().Dy()).To(BeNumerically(">=", 400))
		for i := range 2 {
			g.Expect(countColor(img, plotutil.Color(i))).To(BeNumerically(">", 50), "line %d drawn", i)
		}
	}

	g.Expect(writeLineChart(filepath.Join(dir, "zero.png"), "", "", "", true, false, []line{{Name: "a", Points: [][2]float64{{0, 1}}}})).
		To(MatchError(ContainSubstring(`line "a"`)))
	g.Expect(writeLineChart(filepath.Join(dir, "none.png"), "", "", "", false, false, []line{{Name: "a"}})).To(HaveOccurred())
	g.Expect(filepath.Join(dir, "none.png")).NotTo(BeAnExistingFile())
}

// countColor counts the pixels of img that are exactly c.
func countColor(img image.Image, c color.Color) int {
	want := color.RGBAModel.Convert(c)
	n := 0
	b := img.Bounds()
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			if color.RGBAModel.Convert(img.At(x, y)) == want {
				n++
			}
		}
	}
	return n
}

func TestResidentIn(t *testing.T) {
	g := NewWithT(t)
	smaps := `00400000-0141a000 r-xp 00000000 fd:00 123 /opt/manager
Size:              16488 kB
Rss:               12776 kB
0141a000-023e8000 r--p 0101a000 fd:00 123 /opt/manager
Rss:               12280 kB
023e8000-02472000 rw-p 01fe8000 fd:00 123 /opt/manager
Rss:                 488 kB
02472000-044be000 rw-p 00000000 00:00 0
Rss:                 128 kB
7f0000000000-7f0000001000 r-xp 00000000 fd:00 9 /opt/other
Rss:                   4 kB
`
	code, rodata, err := residentIn(strings.NewReader(smaps), "/opt/manager")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(code).To(Equal(int64(12776)))
	g.Expect(rodata).To(Equal(int64(12280)))
}

func TestParseInitTrace(t *testing.T) {
	g := NewWithT(t)
	out := `init runtime @0.074 ms, 0.074 ms clock, 0 bytes, 0 allocs
init k8s.io/api/core/v1 @12 ms, 0.21 ms clock, 67272 bytes, 512 allocs
Usage of manager:
init k8s.io/client-go/kubernetes/scheme @20 ms, 6.6 ms clock, 668904 bytes, 9000 allocs
`
	pkgs, total := parseInitTrace(out)
	g.Expect(total).To(Equal(int64(67272 + 668904)))
	g.Expect(pkgs).To(HaveLen(3))
	g.Expect(pkgs[0]).To(Equal(initAlloc{"k8s.io/client-go/kubernetes/scheme", 668904}))
}

func TestInstallWritesACopy(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	src := filepath.Join(dir, "manager")
	g.Expect(os.WriteFile(src, []byte("\x7fELF binary"), 0o755)).To(Succeed())
	dst := filepath.Join(dir, "install", "manager")
	g.Expect(install(src, dst)).To(Succeed())
	data, err := os.ReadFile(dst)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(data)).To(Equal("\x7fELF binary"))
	info, err := os.Stat(dst)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.Mode().Perm()&0o100).NotTo(BeZero(), "executable")
}

func TestCountWrites(t *testing.T) {
	counter := func(verb, resource string, v float64) *dto.Metric {
		return &dto.Metric{
			Label:   []*dto.LabelPair{{Name: proto.String("verb"), Value: proto.String(verb)}, {Name: proto.String("resource"), Value: proto.String(resource)}},
			Counter: &dto.Counter{Value: proto.Float64(v)},
		}
	}
	f := &dto.MetricFamily{Metric: []*dto.Metric{
		counter("APPLY", "configmaps", 3), counter("PATCH", "namespaces", 1), counter("POST", "configmaps", 2),
		counter("GET", "configmaps", 50), counter("LIST", "configmaps", 5), counter("WATCH", "configmaps", 1),
		counter("PUT", "leases", 9), counter("POST", "events", 4), counter("PUT", "clusteroperators", 2),
	}}
	if got := countWrites(f); got != 6 {
		t.Errorf("countWrites = %d, want 6 (APPLY, PATCH and POST on payload objects)", got)
	}
	if got := countWrites(nil); got != 0 {
		t.Errorf("countWrites(nil) = %d", got)
	}
}
