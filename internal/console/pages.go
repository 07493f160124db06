package console

import (
	"bytes"
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strings"

	"github.com/tidelog/tide/internal/scenario"
)

// pages serves the console's pages from one Source.
type pages struct {
	source    Source
	nodeID    int32
	scenarios *scenarioCache
}

// topicRow is one line of the overview's topic table.
type topicRow struct {
	Name            string
	Partitions      int
	Replication     int
	UnderReplicated int
	Offline         int
}

func (p *pages) overview(w http.ResponseWriter, r *http.Request) {
	snapshot, ok := p.source.Snapshot()
	if !ok {
		http.Error(w, "the node did not answer in time; try again", http.StatusServiceUnavailable)
		return
	}
	var rows []topicRow
	for _, topic := range snapshot.Topics {
		row := topicRow{Name: topic.Name, Partitions: len(topic.Partitions)}
		for _, partition := range topic.Partitions {
			row.Replication = max(row.Replication, len(partition.Replicas))
			if len(partition.ISR) < len(partition.Replicas) {
				row.UnderReplicated++
			}
			if partition.Leader < 0 {
				row.Offline++
			}
		}
		rows = append(rows, row)
	}
	p.render(w, overviewPage, map[string]any{"Snapshot": snapshot, "Topics": rows, "Charts": rateCharts(p.source.Rates())})
}

func (p *pages) topic(w http.ResponseWriter, r *http.Request) {
	snapshot, ok := p.source.Snapshot()
	if !ok {
		http.Error(w, "the node did not answer in time; try again", http.StatusServiceUnavailable)
		return
	}
	name := r.PathValue("name")
	index := slices.IndexFunc(snapshot.Topics, func(t Topic) bool { return t.Name == name })
	if index < 0 {
		http.Error(w, fmt.Sprintf("no topic %q in this node's metadata", name), http.StatusNotFound)
		return
	}
	type drawn struct {
		Partition
		Drawing template.HTML
	}
	var partitions []drawn
	for _, partition := range snapshot.Topics[index].Partitions {
		partitions = append(partitions, drawn{Partition: partition, Drawing: drawReplicas(partitionBars(snapshot.NodeID, partition))})
	}
	p.render(w, topicPage, map[string]any{"Title": "topic " + name, "Snapshot": snapshot, "Topic": snapshot.Topics[index], "Partitions": partitions})
}

// partitionBars is what this node knows of each replica of a partition:
// its own replica whole; as the leader, each follower's log end offset
// (its lag is the leader's log end less it); of the others, nothing.
func partitionBars(self int32, partition Partition) []replicaBar {
	var bars []replicaBar
	leaderEnd := int64(-1)
	if partition.Local != nil && partition.Leader == self {
		leaderEnd = partition.Local.LogEnd
	}
	for _, id := range partition.Replicas {
		bar := replicaBar{Label: replicaLabel(id, partition), HighWatermark: -1}
		switch follower, known := partition.Followers[id]; {
		case id == self && partition.Local != nil:
			local := partition.Local
			bar.Known, bar.LogStart, bar.HighWatermark, bar.LogEnd = true, local.LogStart, local.HighWatermark, local.LogEnd
			bar.Note = fmt.Sprintf("hw %d, leo %d", local.HighWatermark, local.LogEnd)
			if local.Role == "follower" && local.FetcherLag >= 0 {
				bar.Note += fmt.Sprintf(", fetcher lag %d", local.FetcherLag)
			}
		case known && leaderEnd >= 0:
			// What a follower holds below the leader's high watermark is
			// committed; the leader does not know the follower's own.
			bar.Known, bar.LogStart, bar.LogEnd = true, partition.Local.LogStart, follower
			bar.HighWatermark = min(partition.Local.HighWatermark, follower)
			bar.Note = fmt.Sprintf("leo %d, lag %d", follower, leaderEnd-follower)
		case partition.Leader == id:
			bar.Note = fmt.Sprintf("offsets on broker %d's console", id)
		default:
			bar.Note = "offsets known to its broker"
		}
		bars = append(bars, bar)
	}
	return bars
}

func replicaLabel(id int32, partition Partition) string {
	var roles []string
	if id == partition.Leader {
		roles = append(roles, "leader")
	}
	if !slices.Contains(partition.ISR, id) {
		roles = append(roles, "out of ISR")
	}
	if len(roles) == 0 {
		return fmt.Sprintf("broker %d", id)
	}
	return fmt.Sprintf("broker %d (%s)", id, strings.Join(roles, ", "))
}

// groups shows the consumer groups this node coordinates: each group's
// state and members, and per partition the committed offset, the end
// offset and the lag, drawn to one scale per group.
func (p *pages) groups(w http.ResponseWriter, r *http.Request) {
	snapshot, ok := p.source.Snapshot()
	if !ok {
		http.Error(w, "the node did not answer in time; try again", http.StatusServiceUnavailable)
		return
	}
	type drawn struct {
		Group
		Drawing template.HTML
		Lag     int64
	}
	var groups []drawn
	for _, group := range snapshot.Groups {
		shown := drawn{Group: group}
		var bars []replicaBar
		for _, partition := range group.Partitions {
			if partition.Lag < 0 {
				continue
			}
			shown.Lag += partition.Lag
			// Committed records dark, the lag light: the bar is the
			// partition up to its end offset.
			bars = append(bars, replicaBar{Label: fmt.Sprintf("%s-%d", partition.Topic, partition.Partition), Known: true,
				HighWatermark: min(partition.Committed, partition.EndOffset), LogEnd: partition.EndOffset,
				Note: fmt.Sprintf("lag %d, at %d of %d", partition.Lag, partition.Committed, partition.EndOffset)})
		}
		if len(bars) > 0 {
			shown.Drawing = drawReplicas(bars)
		}
		groups = append(groups, shown)
	}
	p.render(w, groupsPage, map[string]any{"Groups": groups, "Omitted": snapshot.GroupsOmitted})
}

func (p *pages) rates(w http.ResponseWriter, r *http.Request) {
	p.render(w, ratesPage, map[string]any{"Charts": rateCharts(p.source.Rates())})
}

// rateCharts draws the bytes and requests of produce and fetch per second.
func rateCharts(samples []RateSample) []template.HTML {
	var produceBytes, fetchBytes, produceRequests, fetchRequests []float64
	for _, sample := range samples {
		produceBytes, fetchBytes = append(produceBytes, sample.ProduceBytes), append(fetchBytes, sample.FetchBytes)
		produceRequests, fetchRequests = append(produceRequests, sample.ProduceRequests), append(fetchRequests, sample.FetchRequests)
	}
	return []template.HTML{
		drawRates("bytes per second", "B/s", []series{{"produce in", "#c0392b", produceBytes}, {"fetch out", "#1f5fa8", fetchBytes}}),
		drawRates("requests per second", "req/s", []series{{"produce", "#c0392b", produceRequests}, {"fetch", "#1f5fa8", fetchRequests}}),
	}
}

func (p *pages) scenarioList(w http.ResponseWriter, r *http.Request) {
	p.render(w, scenarioListPage, map[string]any{"Scenarios": scenario.List()})
}

func (p *pages) scenario(w http.ResponseWriter, r *http.Request) {
	run, err := p.scenarios.replay(r.PathValue("name"), r.URL.Query().Get("legacy") == "1")
	if err != nil {
		http.Error(w, err.Error(), http.StatusNotFound)
		return
	}
	p.render(w, scenarioPage, map[string]any{"Title": "scenario " + run.Name, "Run": run})
}

func (p *pages) render(w http.ResponseWriter, page consolePage, data map[string]any) {
	var out bytes.Buffer
	title := page.title
	if given, ok := data["Title"].(string); ok {
		title = given
	}
	if err := page.template.ExecuteTemplate(&out, "layout", pageData{Title: title, Refresh: page.refresh, NodeID: p.nodeID, Data: data}); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Write(out.Bytes())
}
