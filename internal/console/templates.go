package console

import (
	"fmt"
	"html/template"
	"strings"
)

// layout is every page's frame: the navigation and the style. Live pages
// refresh themselves every 2 s with a meta refresh; the scenario pages,
// fixed replays, do not.
const layout = `<!doctype html>
<html lang="en"><head><meta charset="utf-8">
{{if .Refresh}}<meta http-equiv="refresh" content="2">{{end}}
<title>tide: {{.Title}}</title>
<style>
body{font:14px/1.4 system-ui,sans-serif;margin:0;color:#222}
header{background:#12344d;color:#fff;padding:8px 16px}
header a{color:#fff;margin-right:16px;text-decoration:none}
main{padding:8px 16px}
table{border-collapse:collapse;margin:8px 0}
td,th{border-bottom:1px solid #ddd;padding:3px 10px;text-align:left}
.ok{color:#1e7b34}.bad{color:#b3261e;font-weight:bold}.muted{fill:#888;color:#888}
svg text{font:12px system-ui,sans-serif}
pre{background:#f4f4f4;padding:6px;margin:2px 0 10px;white-space:pre-wrap}
.timeline{display:flex;flex-wrap:wrap;gap:12px}.frame{border:1px solid #ddd;padding:6px}
.step{margin:6px 0 14px}.comment{color:#444;max-width:80ch}
</style></head><body>
<header><b>tide</b> node {{.NodeID}} &nbsp; <a href="/">overview</a><a href="/groups">groups</a><a href="/rates">rates</a><a href="/scenarios">scenarios</a></header>
<main><h2>{{.Title}}</h2>
{{template "body" .Data}}
</main></body></html>`

var (
	overviewPage = page("overview", true, `
{{with .Snapshot}}
<p id="controller">{{if .Voter}}This node is a voter of the metadata quorum{{if .Active}}, <b>the active controller</b>{{end}}, raft term {{.Term}}.{{else}}This node is a broker only.{{end}}
Active controller: {{if ge .Leader 0}}node {{.Leader}}{{else}}<span class="bad">none known</span>{{end}}. Metadata offset {{.MetadataOffset}}.</p>
<h3>Brokers</h3>
<table id="brokers"><tr><th>broker</th><th>Kafka endpoint</th><th>epoch</th><th>state</th></tr>
{{range .Brokers}}<tr><td>{{.ID}}</td><td>{{.Endpoint}}</td><td>{{.Epoch}}</td><td>{{if .Fenced}}<span class="bad">fenced</span>{{else if .ShuttingDown}}shutting down{{else}}<span class="ok">serving</span>{{end}}</td></tr>{{end}}
</table>
{{end}}
<h3>Topics</h3>
<table id="topics"><tr><th>topic</th><th>partitions</th><th>replication factor</th><th>under-replicated</th><th>offline</th></tr>
{{range .Topics}}<tr><td><a href="/topic/{{.Name}}">{{.Name}}</a></td><td>{{.Partitions}}</td><td>{{.Replication}}</td>
<td>{{if .UnderReplicated}}<span class="bad">{{.UnderReplicated}}</span>{{else}}0{{end}}</td><td>{{if .Offline}}<span class="bad">{{.Offline}}</span>{{else}}0{{end}}</td></tr>{{else}}<tr><td colspan="5">no topics yet</td></tr>{{end}}
</table>
<h3>Rates on this node</h3>
{{range .Charts}}<div>{{.}}</div>{{end}}`)

	topicPage = page("topic", true, `
<p>Topic id {{.Topic.ID}}. Each partition's replicas to one scale: the committed records
[log start, high watermark) dark, the tail up to the log end offset light. This node knows its
own replica's offsets and, where it leads, its followers' log end offsets as they last fetched;
where it follows, its fetcher lag: its leader's high watermark, as last answered, less its log end.</p>
{{range .Partitions}}
<h3 id="partition-{{.Number}}">partition {{.Number}}</h3>
<p>leader {{if ge .Leader 0}}broker {{.Leader}}{{else}}<span class="bad">none (offline)</span>{{end}},
leader epoch {{.LeaderEpoch}}, partition epoch {{.PartitionEpoch}}, replicas {{ids .Replicas}}, ISR {{ids .ISR}}{{if .ELR}}, ELR {{ids .ELR}}{{end}}</p>
{{.Drawing}}
{{end}}`)

	groupsPage = page("consumer groups", true, `
<p>The consumer groups this node coordinates (each group is coordinated by the leader of its
__consumer_offsets partition; the others are on their coordinators' consoles). A partition's lag is
its end offset (the high watermark of this node's replica: exact where it leads the partition) less
the group's committed offset; where this node hosts no replica of the partition its lag is unknown here.</p>
{{if .Omitted}}<p class="bad">{{.Omitted}} group partitions left out (--metrics-group-partitions-max).</p>{{end}}
{{range .Groups}}
<h3 id="group-{{.ID}}">{{.ID}}</h3>
<p>{{.Type}} group, state <b>{{.State}}</b>{{if .ProtocolType}}, protocol type {{.ProtocolType}}{{end}}{{if .Protocol}}, protocol {{.Protocol}}{{end}},
{{len .Members}} member{{if ne (len .Members) 1}}s{{end}}{{range .Members}} <code>{{.ID}}</code> ({{.ClientID}} {{.ClientHost}}){{end}}; total lag {{.Lag}}.</p>
<table class="offsets"><tr><th>topic</th><th>partition</th><th>committed offset</th><th>end offset</th><th>lag</th></tr>
{{range .Partitions}}<tr><td><a href="/topic/{{.Topic}}">{{.Topic}}</a></td><td>{{.Partition}}</td><td>{{.Committed}}</td>
<td>{{if ge .EndOffset 0}}{{.EndOffset}}{{if not .FromLeader}} (as a follower){{end}}{{else}}<span class="muted">not hosted here</span>{{end}}</td>
<td class="lag">{{if ge .Lag 0}}{{.Lag}}{{else}}<span class="muted">unknown</span>{{end}}</td></tr>
{{else}}<tr><td colspan="5">no committed offsets</td></tr>{{end}}
</table>
{{.Drawing}}
{{else}}<p id="no-groups">This node coordinates no consumer group.</p>{{end}}`)

	ratesPage = page("rates", true, `
<p>Requests this node's Kafka listener served, per second, over the last two minutes.</p>
{{range .Charts}}<div>{{.}}</div>{{end}}`)

	scenarioListPage = page("scenarios", false, `
<p>The seed bugs tide designs out, replayed step by step on the simulator. Each runs with its
rule on (safe) or off (the failure happens).</p>
<table id="scenarios"><tr><th>scenario</th><th>what it shows</th><th></th></tr>
{{range .Scenarios}}<tr><td><a href="/scenario/{{.Name}}">{{.Name}}</a></td><td>{{.Title}}</td><td><a href="/scenario/{{.Name}}?legacy=1">with the rule off</a></td></tr>{{end}}
</table>`)

	scenarioPage = page("scenario", false, `
{{with .Run}}
<p>{{.Title}} Rule {{if .Legacy}}<span class="bad">off</span> (<a href="/scenario/{{.Name}}">replay with it on</a>){{else}}on (<a href="/scenario/{{.Name}}?legacy=1">replay with it off</a>){{end}}.</p>
<p id="verdict" class="{{if .Safe}}ok{{else}}bad{{end}}">{{.Verdict}}</p>
<p class="comment">{{.Intro}}</p>
<h3>Timeline</h3>
<div class="timeline" id="timeline">{{range $i, $s := .Steps}}{{if $s.Drawing}}<div class="frame"><a href="#step-{{$i}}">step {{$i}}</a>
<p>{{$s.Header}}</p>{{$s.Drawing}}</div>{{end}}{{end}}</div>
<h3>Step by step</h3>
{{range $i, $s := .Steps}}<div class="step" id="step-{{$i}}">
{{if .Comment}}<p class="comment">{{.Comment}}</p>{{end}}
<code>&gt; {{.Command}}</code>
{{if .Drawing}}<p>{{.Header}}</p>{{.Drawing}}{{else if .Output}}<pre>{{.Output}}</pre>{{end}}
</div>{{end}}
{{end}}`)
)

// consolePage is one page: its title, whether it refreshes itself, and
// its template (the layout around the page's body).
type consolePage struct {
	title    string
	refresh  bool
	template *template.Template
}

// pageData is what the layout reads.
type pageData struct {
	Title   string
	Refresh bool
	NodeID  int32
	Data    map[string]any
}

// page builds one page: the layout around body.
func page(title string, refresh bool, body string) consolePage {
	functions := template.FuncMap{"ids": func(ids []int32) string {
		text := make([]string, len(ids))
		for i, id := range ids {
			text[i] = fmt.Sprint(id)
		}
		return "[" + strings.Join(text, ",") + "]"
	}}
	t := template.Must(template.New("layout").Funcs(functions).Parse(layout))
	template.Must(t.New("body").Parse(body))
	return consolePage{title: title, refresh: refresh, template: t}
}
