package console

import (
	"fmt"
	"html"
	"html/template"
	"strings"
)

// replicaBar is one replica's row in a partition drawing: what is known of
// its offsets. A follower's high watermark is not known to its leader,
// and a replica on another broker is known only to that broker.
type replicaBar struct {
	Label         string
	Known         bool
	LogStart      int64
	HighWatermark int64 // -1 when unknown
	LogEnd        int64
	Note          string
}

const (
	barChartWidth  = 640
	barLabelWidth  = 150
	barRowHeight   = 24
	barNoteWidth   = 190
	committedColor = "#1f5fa8"
	tailColor      = "#9cc3ee"
)

// drawReplicas draws the replicas of one partition to one scale: the
// committed range [log start, high watermark) dark, the uncommitted tail
// [high watermark, log end) light, a replica's log end marked by its bar's
// end. One glance shows who lags and by how much.
func drawReplicas(bars []replicaBar) template.HTML {
	low, high := int64(-1), int64(0)
	for _, bar := range bars {
		if !bar.Known {
			continue
		}
		if low < 0 || bar.LogStart < low {
			low = bar.LogStart
		}
		high = max(high, bar.LogEnd)
	}
	low = max(low, 0)
	span := max(high-low, 1)
	plot := barChartWidth - barLabelWidth - barNoteWidth
	x := func(offset int64) float64 { return barLabelWidth + float64(offset-low)*float64(plot)/float64(span) }
	var svg strings.Builder
	fmt.Fprintf(&svg, `<svg class="replicas" width="%d" height="%d" role="img" aria-label="replica offsets">`, barChartWidth, barRowHeight*len(bars)+4)
	for i, bar := range bars {
		y := i*barRowHeight + 4
		fmt.Fprintf(&svg, `<text x="0" y="%d">%s</text>`, y+14, html.EscapeString(bar.Label))
		if !bar.Known {
			fmt.Fprintf(&svg, `<text x="%d" y="%d" class="muted">%s</text>`, barLabelWidth, y+14, html.EscapeString(bar.Note))
			continue
		}
		committedEnd := bar.HighWatermark
		if committedEnd < 0 {
			committedEnd = bar.LogStart
		}
		fmt.Fprintf(&svg, `<rect x="%.1f" y="%d" width="%.1f" height="16" fill="%s"/>`, x(bar.LogStart), y, x(min(committedEnd, bar.LogEnd))-x(bar.LogStart), committedColor)
		if bar.LogEnd > committedEnd {
			fmt.Fprintf(&svg, `<rect x="%.1f" y="%d" width="%.1f" height="16" fill="%s"/>`, x(committedEnd), y, x(bar.LogEnd)-x(committedEnd), tailColor)
		}
		fmt.Fprintf(&svg, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#222"/>`, x(bar.LogEnd), x(bar.LogEnd), y-1, y+17)
		fmt.Fprintf(&svg, `<text x="%d" y="%d">%s</text>`, barChartWidth-barNoteWidth+8, y+14, html.EscapeString(bar.Note))
	}
	svg.WriteString(`</svg>`)
	return template.HTML(svg.String())
}

// series is one line of a rate chart.
type series struct {
	Name   string
	Color  string
	Values []float64
}

const (
	rateChartWidth  = 640
	rateChartHeight = 140
)

// drawRates draws series over the same seconds, to one scale from zero,
// with the largest value written on the axis.
func drawRates(title, unit string, lines []series) template.HTML {
	top := 0.0
	points := 0
	for _, line := range lines {
		points = max(points, len(line.Values))
		for _, value := range line.Values {
			top = max(top, value)
		}
	}
	if top == 0 {
		top = 1
	}
	var svg strings.Builder
	fmt.Fprintf(&svg, `<svg class="rates" width="%d" height="%d" role="img" aria-label="%s">`, rateChartWidth, rateChartHeight+30, html.EscapeString(title))
	fmt.Fprintf(&svg, `<text x="0" y="12">%s (max %s %s)</text>`, html.EscapeString(title), humanNumber(top), html.EscapeString(unit))
	fmt.Fprintf(&svg, `<rect x="0" y="20" width="%d" height="%d" fill="none" stroke="#bbb"/>`, rateChartWidth, rateChartHeight)
	for n, line := range lines {
		var path strings.Builder
		for i, value := range line.Values {
			px := float64(rateChartWidth) * float64(i) / float64(max(points-1, 1))
			py := 20 + float64(rateChartHeight)*(1-value/top)
			fmt.Fprintf(&path, "%.1f,%.1f ", px, py)
		}
		fmt.Fprintf(&svg, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`, line.Color, strings.TrimSpace(path.String()))
		fmt.Fprintf(&svg, `<text x="%d" y="12" fill="%s">%s</text>`, rateChartWidth-260+n*130, line.Color, html.EscapeString(line.Name))
	}
	svg.WriteString(`</svg>`)
	return template.HTML(svg.String())
}

// humanNumber writes a rate with a metric suffix.
func humanNumber(value float64) string {
	switch {
	case value >= 1e9:
		return fmt.Sprintf("%.1fG", value/1e9)
	case value >= 1e6:
		return fmt.Sprintf("%.1fM", value/1e6)
	case value >= 1e3:
		return fmt.Sprintf("%.1fk", value/1e3)
	}
	return fmt.Sprintf("%.0f", value)
}
