package chaos

import (
	"fmt"
	"html"
	"io"
	"sort"
	"strings"
)

// acknowledgedPerSecond counts acknowledgements by the second they came
// in, over the whole run.
func acknowledgedPerSecond(h History) []int {
	var last int64
	for _, p := range h.Produces {
		last = max(last, p.AnsweredMs)
	}
	for _, f := range h.Faults {
		last = max(last, f.EndMs)
	}
	seconds := make([]int, last/1000+1)
	for _, p := range h.Produces {
		if p.Outcome == Acknowledged {
			seconds[p.AnsweredMs/1000]++
		}
	}
	return seconds
}

// faultsIn names the faults active during second s.
func faultsIn(faults []FaultRecord, second int) []string {
	var names []string
	from, to := int64(second)*1000, int64(second+1)*1000
	for _, f := range faults {
		if f.StartMs < to && f.EndMs >= from {
			names = append(names, fmt.Sprintf("%s%v", f.Kind, f.Nodes))
		}
	}
	return names
}

// WriteTimeline prints acknowledgements per second as a bar, with the
// faults active in each second beside it.
func WriteTimeline(w io.Writer, h History, seconds []int) {
	peak := 1
	for _, n := range seconds {
		peak = max(peak, n)
	}
	fmt.Fprintln(w, "second  acks/s")
	for s, n := range seconds {
		bar := strings.Repeat("#", n*40/peak)
		faults := strings.Join(faultsIn(h.Faults, s), " ")
		fmt.Fprintf(w, "%6d %7d %-40s %s\n", s, n, bar, faults)
	}
}

// FaultCounts are the faults injected, by kind.
func FaultCounts(h History) map[string]int {
	counts := map[string]int{}
	for _, f := range h.Faults {
		counts[f.Kind]++
	}
	return counts
}

// SortedCounts renders counts as "a=1 b=2", by name.
func SortedCounts(counts map[string]int) string {
	names := make([]string, 0, len(counts))
	for name := range counts {
		names = append(names, name)
	}
	sort.Strings(names)
	var parts []string
	for _, name := range names {
		parts = append(parts, fmt.Sprintf("%s=%d", name, counts[name]))
	}
	return strings.Join(parts, " ")
}

// WriteSVG draws the timeline: a bar per second for the
// acknowledgements, each fault a shaded band labelled with its kind and
// nodes.
func WriteSVG(w io.Writer, h History, seconds []int) error {
	const width, height, left, top, bottom = 960, 320, 50, 20, 40
	plotWidth, plotHeight := float64(width-left-10), float64(height-top-bottom)
	peak := 1
	for _, n := range seconds {
		peak = max(peak, n)
	}
	step := plotWidth / float64(max(1, len(seconds)))
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="10">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", width, height)
	palette := []string{"#f4a582", "#92c5de", "#b2abd2", "#fddbc7", "#d1e5f0", "#a6dba0", "#fee090", "#e0e0e0"}
	colors := map[string]string{}
	for _, f := range h.Faults {
		if _, ok := colors[f.Kind]; !ok {
			colors[f.Kind] = palette[len(colors)%len(palette)]
		}
		x0 := float64(left) + float64(f.StartMs)/1000*step
		x1 := float64(left) + float64(f.EndMs)/1000*step
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%.0f" fill="%s" opacity="0.6"><title>%s</title></rect>`+"\n",
			x0, top, max(1, x1-x0), plotHeight, colors[f.Kind], html.EscapeString(fmt.Sprintf("%s %v %s", f.Kind, f.Nodes, f.Note)))
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" transform="rotate(90 %.1f %d)">%s</text>`+"\n", x0+2, top+4, x0+2, top+4, html.EscapeString(fmt.Sprintf("%s %v", f.Kind, f.Nodes)))
	}
	for s, n := range seconds {
		barHeight := plotHeight * float64(n) / float64(peak)
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#2166ac"><title>%d s: %d acks</title></rect>`+"\n",
			float64(left)+float64(s)*step, float64(top)+plotHeight-barHeight, max(0.5, step-1), barHeight, s, n)
	}
	fmt.Fprintf(&b, `<line x1="%d" y1="%.0f" x2="%d" y2="%.0f" stroke="black"/>`+"\n", left, float64(top)+plotHeight, width-10, float64(top)+plotHeight)
	fmt.Fprintf(&b, `<text x="5" y="%d">%d/s</text><text x="5" y="%.0f">0</text>`+"\n", top+8, peak, float64(top)+plotHeight)
	for s := 0; s < len(seconds); s += 10 {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.0f">%ds</text>`+"\n", float64(left)+float64(s)*step, float64(top)+plotHeight+14, s)
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d">acknowledged writes per second; shaded: faults (hover for the nodes)</text>`+"\n", left, height-8)
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}
