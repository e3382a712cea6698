package main

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"time"
)

var (
	white    = color.RGBA{255, 255, 255, 255}
	black    = color.RGBA{30, 30, 30, 255}
	grey     = color.RGBA{150, 150, 150, 255}
	light    = color.RGBA{228, 228, 228, 255}
	red      = color.RGBA{210, 40, 40, 255}
	palettes = [][2]color.RGBA{ // box fill, border per section
		{{190, 210, 240, 255}, {40, 80, 160, 255}},
		{{200, 235, 200, 255}, {40, 120, 50, 255}},
		{{245, 220, 185, 255}, {170, 100, 20, 255}},
		{{225, 205, 240, 255}, {110, 60, 150, 255}},
		{{200, 230, 235, 255}, {30, 110, 120, 255}},
	}
)

// writeChart draws one row per series: a box plot over a strip of the runs,
// on a shared logarithmic time axis.
func writeChart(path string, r *report) error {
	type row struct {
		s   *series
		sec int
	}
	var rows []row
	for i, sec := range r.Sections {
		for _, s := range sec.Series {
			if len(s.Values) > 0 && !s.NoChart {
				rows = append(rows, row{s, i})
			}
		}
	}
	if len(rows) == 0 {
		return nil
	}
	const (
		scale    = 2
		rowH     = 34
		top      = 60
		gap      = 10 // between sections
		right    = 40
		valueW   = 110
		axisH    = 90
		minLabel = 24
	)
	labelChars := minLabel
	for _, rw := range rows {
		labelChars = max(labelChars, len([]rune(rw.s.Short)))
	}
	x0 := 16 + labelChars*glyphW*scale + valueW
	width := x0 + 900 + right
	sections := 0
	for i := range rows {
		if i == 0 || rows[i].sec != rows[i-1].sec {
			sections++
		}
	}
	height := top + len(rows)*rowH + sections*gap + axisH
	img := image.NewRGBA(image.Rect(0, 0, width, height))
	fillRect(img, 0, 0, width, height, white)
	drawText(img, 16, 16, scale, black, "featuregate-operator benchmarks: time per run, log scale")
	drawText(img, 16, 36, 1, grey, fmt.Sprintf("%s, %d cpus, load %s; box p25-p75, bar median, whiskers min-max, dots runs, red target",
		r.Started.UTC().Format("2006-01-02 15:04 MST"), r.Machine.CPUs, r.Machine.LoadBefore))

	// Axis range: whole decades around every value and target.
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, rw := range rows {
		for _, v := range append(slices.Clone(rw.s.Values), rw.s.Target) {
			if v > 0 {
				lo, hi = math.Min(lo, float64(v)), math.Max(hi, float64(v))
			}
		}
	}
	lo = math.Pow(10, math.Floor(math.Log10(lo)))
	hi = math.Pow(10, math.Ceil(math.Log10(hi)))
	if hi/lo < 100 {
		hi = lo * 100
	}
	x1 := width - right
	xOf := func(d time.Duration) int {
		v := math.Max(float64(d), lo)
		return x0 + int(math.Round((math.Log10(v)-math.Log10(lo))/(math.Log10(hi)-math.Log10(lo))*float64(x1-x0)))
	}
	plotTop, plotBottom := top-8, height-axisH+4
	for dec := lo; dec <= hi*1.0001; dec *= 10 {
		for m := 1; m < 10; m++ {
			v := dec * float64(m)
			if v > hi*1.0001 {
				break
			}
			x := xOf(time.Duration(v))
			c := light
			if m == 1 {
				c = grey
			}
			fillRect(img, x, plotTop, 1, plotBottom-plotTop, c)
			if m == 1 {
				label := tickLabel(time.Duration(v))
				drawText(img, x-textWidth(label, scale)/2, plotBottom+8, scale, black, label)
			}
		}
	}
	drawText(img, x0, plotBottom+34, scale, grey, "median shown left of each row")

	y := top
	for i, rw := range rows {
		if i > 0 && rw.sec != rows[i-1].sec {
			fillRect(img, 8, y+gap/2-1, width-16, 1, grey)
			y += gap
		}
		pal := palettes[rw.sec%len(palettes)]
		yc := y + rowH/2
		sm := summarize(rw.s.Values)
		drawText(img, 16, yc-glyphH*scale/2, scale, black, rw.s.Short)
		med := fmtDur(sm.P50)
		drawText(img, x0-12-textWidth(med, scale), yc-glyphH*scale/2, scale, pal[1], med)
		sorted := slices.Clone(rw.s.Values)
		slices.Sort(sorted)
		q1, q3 := percentile(sorted, 25), percentile(sorted, 75)
		// Whisker, box, median.
		fillRect(img, xOf(sm.Min), yc-1, xOf(sm.Max)-xOf(sm.Min)+1, 2, grey)
		fillRect(img, xOf(sm.Min), yc-6, 2, 12, grey)
		fillRect(img, xOf(sm.Max)-1, yc-6, 2, 12, grey)
		bx0, bx1 := xOf(q1), xOf(q3)
		fillRect(img, bx0, yc-10, bx1-bx0+1, 20, pal[0])
		fillRect(img, bx0, yc-10, bx1-bx0+1, 1, pal[1])
		fillRect(img, bx0, yc+9, bx1-bx0+1, 1, pal[1])
		fillRect(img, bx0, yc-10, 1, 20, pal[1])
		fillRect(img, bx1, yc-10, 1, 20, pal[1])
		// Dots, spread over the row so that equal values stay visible.
		for k, v := range rw.s.Values {
			dy := (k*7)%15 - 7
			fillRect(img, xOf(v)-1, yc+dy-1, 3, 3, black)
		}
		fillRect(img, xOf(sm.P50)-2, yc-12, 4, 24, pal[1])
		if rw.s.Target > 0 {
			tx := xOf(rw.s.Target)
			for ty := yc - 15; ty < yc+15; ty += 4 {
				fillRect(img, tx-1, ty, 3, 2, red)
			}
		}
		y += rowH
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := png.Encode(f, img); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// tickLabel names a decade: 100us, 1ms, 10ms, 1s, ...
func tickLabel(d time.Duration) string {
	switch {
	case d < time.Millisecond:
		return fmt.Sprintf("%dus", int(math.Round(float64(d)/float64(time.Microsecond))))
	case d < time.Second:
		return fmt.Sprintf("%dms", int(math.Round(float64(d)/float64(time.Millisecond))))
	default:
		return fmt.Sprintf("%ds", int(math.Round(float64(d)/float64(time.Second))))
	}
}
