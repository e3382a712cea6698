package main

import (
	"cmp"
	"errors"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

var (
	chartBlack = color.RGBA{30, 30, 30, 255}
	chartGrey  = color.RGBA{150, 150, 150, 255}
	chartLight = color.RGBA{225, 225, 225, 255}
	targetRed  = color.RGBA{210, 40, 40, 255}
	// Box fill and border of each section, in turn, so that a section's
	// rows read as one group.
	palettes = [][2]color.RGBA{
		{{190, 210, 240, 255}, {40, 80, 160, 255}},
		{{200, 235, 200, 255}, {40, 120, 50, 255}},
		{{245, 220, 185, 255}, {170, 100, 20, 255}},
		{{225, 205, 240, 255}, {110, 60, 150, 255}},
		{{200, 230, 235, 255}, {30, 110, 120, 255}},
	}
)

// The PNG's resolution: the default 96 dpi leaves 10 pt labels blurry in
// a Markdown viewer that scales the image down.
const chartDPI = 120

// chartRow is one series on the chart, with the section it belongs to.
type chartRow struct {
	s   *series
	sec int
}

// chartRows are the series writeChart draws; none means no chart.
func chartRows(r *report) []chartRow {
	var rows []chartRow
	for i, sec := range r.Sections {
		for _, s := range sec.Series {
			if len(s.Values) > 0 && !s.NoChart {
				rows = append(rows, chartRow{s, i})
			}
		}
	}
	return rows
}

// writeChart draws one row per series: a box plot over the runs, on one
// logarithmic time axis, so that latencies from microseconds to seconds
// compare at a glance. A report with nothing to draw writes no file.
func writeChart(path string, r *report) error {
	rows := chartRows(r)
	if len(rows) == 0 {
		return nil
	}
	lo, hi := decades(rows)
	// A log axis has no place for a run at or below zero (a clock
	// step); it is drawn at the axis' left end rather than lost.
	clamp := func(d time.Duration) float64 { return max(d.Seconds(), lo) }

	// Rows run downwards from y = 0; a section boundary adds a gap with a
	// rule in it.
	const gap = 0.7
	ys := make([]float64, len(rows))
	var rules []float64
	y := 0.0
	for i, rw := range rows {
		if i > 0 && rw.sec != rows[i-1].sec {
			rules = append(rules, y+(1-gap)/2)
			y -= gap
		}
		ys[i] = y
		y--
	}
	yMin, yMax := ys[len(ys)-1]-0.6, 0.6

	p := plot.New()
	sansSerif(p)
	p.Title.Text = "featuregate-operator benchmarks: time per run\n" +
		"box p25–p75, bar median, whiskers min–max, dots the runs, red dashes the target\n" +
		fmt.Sprintf("%s, %d CPUs, load %s", r.Started.UTC().Format("2006-01-02 15:04 MST"), r.Machine.CPUs, r.Machine.LoadBefore)
	p.Title.Padding = vg.Points(10)
	// A label wider than the data area would squeeze the area from the
	// right (gonum pads the axis to fit it), so it stays short.
	p.X.Label.Text = "time per run, log scale; median beside each name"
	p.X.Label.TextStyle.Color = chartGrey
	p.X.Label.Padding = vg.Points(6)
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = logTicks{durationLabel}
	p.Y.Width = 0
	p.Y.Tick.Length = 0
	p.Y.Tick.Label.Font = font.Font{Typeface: "Liberation", Variant: "Mono", Size: vg.Points(10)}

	// gonum's Grid draws labelled ticks alone; the multiples of each
	// decade help read a log axis, so every line is drawn here.
	for dec := lo; dec < hi*1.0001; dec *= 10 {
		for m := 1.0; m < 10 && dec*m < hi*1.0001; m++ {
			c := chartLight
			if m == 1 {
				c = chartGrey
			}
			if err := addLine(p, draw.LineStyle{Color: c, Width: vg.Points(0.6)}, [2]float64{dec * m, yMin}, [2]float64{dec * m, yMax}); err != nil {
				return err
			}
		}
	}
	for _, ry := range rules {
		if err := addLine(p, draw.LineStyle{Color: chartGrey, Width: vg.Points(0.8)}, [2]float64{lo, ry}, [2]float64{hi, ry}); err != nil {
			return err
		}
	}

	labelW := 0
	for _, rw := range rows {
		labelW = max(labelW, len([]rune(rw.s.Short)))
	}
	var ticks []plot.Tick
	const rowH = 21 // points per row
	for i, rw := range rows {
		pal := palettes[rw.sec%len(palettes)]
		sorted := slices.Clone(rw.s.Values)
		slices.Sort(sorted)
		ticks = append(ticks, plot.Tick{Value: ys[i], Label: fmt.Sprintf("%-*s %9s", labelW, rw.s.Short, fmtDur(percentile(sorted, 50)))})

		vals := make(plotter.Values, len(rw.s.Values))
		for k, v := range rw.s.Values {
			vals[k] = clamp(v)
		}
		box, err := plotter.NewBoxPlot(vg.Points(rowH*0.6), ys[i], vals)
		if err != nil {
			return fmt.Errorf("%s: %w", rw.s.Short, err)
		}
		// gonum's box is Tukey's (hinges, 1.5 IQR whiskers, outliers);
		// the chart's must agree with the report's table, and the runs
		// are drawn on their own below.
		box.Horizontal = true
		box.Quartile1, box.Median, box.Quartile3 = clamp(percentile(sorted, 25)), clamp(percentile(sorted, 50)), clamp(percentile(sorted, 75))
		box.AdjLow, box.AdjHigh = clamp(sorted[0]), clamp(sorted[len(sorted)-1])
		box.Outside = nil
		box.FillColor = pal[0]
		box.BoxStyle = draw.LineStyle{Color: pal[1], Width: vg.Points(0.8)}
		box.MedianStyle = draw.LineStyle{Color: pal[1], Width: vg.Points(2.5)}
		box.WhiskerStyle = draw.LineStyle{Color: chartGrey, Width: vg.Points(1)}
		box.CapWidth = vg.Points(rowH * 0.4)
		p.Add(box)

		// The runs, spread over the row so that equal values stay visible.
		dots := make(plotter.XYs, len(rw.s.Values))
		for k, v := range rw.s.Values {
			dots[k] = plotter.XY{X: clamp(v), Y: ys[i] + float64((k*7)%15-7)/7*0.25}
		}
		sc, err := plotter.NewScatter(dots)
		if err != nil {
			return fmt.Errorf("%s: %w", rw.s.Short, err)
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: chartBlack, Radius: vg.Points(1.3), Shape: draw.CircleGlyph{}}
		p.Add(sc)

		if rw.s.Target > 0 {
			t := clamp(rw.s.Target)
			style := draw.LineStyle{Color: targetRed, Width: vg.Points(1.6), Dashes: []vg.Length{vg.Points(2.5), vg.Points(1.5)}}
			if err := addLine(p, style, [2]float64{t, ys[i] - 0.45}, [2]float64{t, ys[i] + 0.45}); err != nil {
				return err
			}
		}
	}
	p.Y.Tick.Marker = plot.ConstantTicks(ticks)
	// After the plotters, which widen the axes to their data.
	p.X.Min, p.X.Max = lo, hi
	p.Y.Min, p.Y.Max = yMin, yMax

	width := vg.Points(680 + 6*float64(labelW+10))
	height := vg.Points(130 + rowH*(yMax-yMin))
	return savePNG(path, width, height, p.Draw)
}

// decades is the time axis, in seconds: whole decades around every value
// and target, at least two of them.
func decades(rows []chartRow) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, rw := range rows {
		for _, v := range append(slices.Clone(rw.s.Values), rw.s.Target) {
			if v > 0 {
				lo, hi = math.Min(lo, v.Seconds()), math.Max(hi, v.Seconds())
			}
		}
	}
	if math.IsInf(lo, 0) { // nothing positive: every value is drawn at lo
		lo, hi = 1e-3, 1e-3
	}
	lo = math.Pow(10, math.Floor(math.Log10(lo)))
	hi = math.Pow(10, math.Ceil(math.Log10(hi)))
	if hi/lo < 100 {
		hi = lo * 100
	}
	return lo, hi
}

// logTicks marks a logarithmic axis: decades labelled, their multiples
// as minor ticks, and 2× and 5× labelled too when the axis spans too few
// decades for those alone to read it by. format writes a label.
type logTicks struct{ format func(float64) string }

func (t logTicks) Ticks(lo, hi float64) []plot.Tick {
	span := math.Log10(hi / lo)
	var ticks []plot.Tick
	labels := 0
	for e := int(math.Floor(math.Log10(lo))); e <= int(math.Ceil(math.Log10(hi))); e++ {
		for m := 1.0; m < 10; m++ {
			v := math.Pow10(e) * m
			if v < lo*(1-1e-9) || v > hi*(1+1e-9) {
				continue
			}
			tk := plot.Tick{Value: v}
			if m == 1 || (span < 2 && (m == 2 || m == 5)) || span < 0.5 {
				tk.Label = t.format(v)
				labels++
			}
			ticks = append(ticks, tk)
		}
	}
	if labels < 2 { // a sliver of a decade
		return plot.DefaultTicks{}.Ticks(lo, hi)
	}
	return ticks
}

func formatFloat(v float64) string { return strconv.FormatFloat(v, 'g', 6, 64) }

// durationLabel writes a time axis value, in seconds, as the report
// writes durations.
func durationLabel(v float64) string {
	return tickLabel(time.Duration(math.Round(v * float64(time.Second))))
}

// tickLabel names a decade: 100µs, 1ms, 10ms, 1s, ...
func tickLabel(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%dµs", int(math.Round(float64(d)/float64(time.Microsecond))))
	case d < time.Second:
		return fmt.Sprintf("%dms", int(math.Round(float64(d)/float64(time.Millisecond))))
	default:
		return fmt.Sprintf("%ds", int(math.Round(d.Seconds())))
	}
}

// line is one named series of (x, y) points for writeLineChart.
type line struct {
	Name   string
	Points [][2]float64
}

// writeLineChart draws lines as XY lines with their points marked and a
// legend: how a measurement grows with its input (say seconds against the
// number of manifests), one line per thing measured. A logarithmic axis
// has no place for values at or below zero, so they are an error rather
// than silently dropped.
func writeLineChart(path, title, xLabel, yLabel string, logX, logY bool, lines []line) error {
	p := plot.New()
	sansSerif(p)
	p.Title.Text = title
	p.Title.Padding = vg.Points(8)
	p.X.Label.Text, p.Y.Label.Text = xLabel, yLabel
	if logX {
		p.X.Scale, p.X.Tick.Marker = plot.LogScale{}, logTicks{formatFloat}
	}
	if logY {
		p.Y.Scale, p.Y.Tick.Marker = plot.LogScale{}, logTicks{formatFloat}
	}
	grid := plotter.NewGrid()
	grid.Vertical.Color, grid.Horizontal.Color = chartLight, chartLight
	p.Add(grid)
	// The legend goes beside the plot rather than gonum's place inside
	// it, where it would hide the lines.
	legend := plot.NewLegend()
	legend.TextStyle.Font.Variant = "Sans"
	legend.TextStyle.Font.Size = vg.Points(11)
	legend.Top, legend.Left = true, true
	legend.ThumbnailWidth = vg.Points(24)
	legend.Padding = vg.Points(4)

	points := 0
	for i, l := range lines {
		xys := make(plotter.XYs, len(l.Points))
		for k, pt := range l.Points {
			if (logX && pt[0] <= 0) || (logY && pt[1] <= 0) {
				return fmt.Errorf("line %q: point (%g, %g) is not positive on a log axis", l.Name, pt[0], pt[1])
			}
			xys[k] = plotter.XY{X: pt[0], Y: pt[1]}
		}
		if len(xys) == 0 {
			continue
		}
		// Measurements may arrive in any order; the line follows x.
		slices.SortStableFunc(xys, func(a, b plotter.XY) int { return cmp.Compare(a.X, b.X) })
		ln, sc, err := plotter.NewLinePoints(xys)
		if err != nil {
			return fmt.Errorf("line %q: %w", l.Name, err)
		}
		ln.Color = plotutil.Color(i)
		ln.Width = vg.Points(1.5)
		ln.Dashes = plotutil.Dashes(i)
		sc.Color = plotutil.Color(i)
		sc.Shape = plotutil.Shape(i)
		sc.Radius = vg.Points(3)
		p.Add(ln, sc)
		legend.Add(l.Name, ln, sc)
		points += len(xys)
	}
	if points == 0 {
		return errors.New("line chart: no points")
	}
	titleH := p.Title.TextStyle.Rectangle(p.Title.Text).Size().Y + p.Title.Padding
	return savePNG(path, vg.Inch*9, vg.Inch*5.5, func(c draw.Canvas) {
		lw := legend.Rectangle(c).Size().X + vg.Points(16)
		p.Draw(draw.Crop(c, 0, -lw, 0, 0))
		legend.Draw(draw.Crop(c, c.Size().X-lw+vg.Points(12), 0, 0, -titleH))
	})
}

// sansSerif sets every text of p in Liberation Sans: gonum's default
// serif reads worse at small sizes on screen.
func sansSerif(p *plot.Plot) {
	for _, f := range []*font.Font{&p.Title.TextStyle.Font, &p.X.Label.TextStyle.Font, &p.Y.Label.TextStyle.Font,
		&p.X.Tick.Label.Font, &p.Y.Tick.Label.Font, &p.Legend.TextStyle.Font} {
		f.Variant = "Sans"
	}
}

// addLine adds a straight segment from a to b.
func addLine(p *plot.Plot, style draw.LineStyle, a, b [2]float64) error {
	l, err := plotter.NewLine(plotter.XYs{{X: a[0], Y: a[1]}, {X: b[0], Y: b[1]}})
	if err != nil {
		return err
	}
	l.LineStyle = style
	p.Add(l)
	return nil
}

// savePNG renders a w × h picture drawn by render at chartDPI into path,
// making its directory.
func savePNG(path string, w, h vg.Length, render func(draw.Canvas)) error {
	c := vgimg.PngCanvas{Canvas: vgimg.NewWith(vgimg.UseWH(w, h), vgimg.UseDPI(chartDPI))}
	// A margin, which gonum leaves out: labels end at the image's edge.
	m := vg.Points(10)
	render(draw.Crop(draw.New(c), m, -m, m, -m))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := c.WriteTo(f); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
