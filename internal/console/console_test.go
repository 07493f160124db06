package console

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// fakeSource is a node of two brokers with one topic: partition 0 led
// here with a follower 3 records behind, partition 1 led elsewhere and
// hosted here as a follower.
type fakeSource struct{ answers bool }

func (f fakeSource) Snapshot() (Snapshot, bool) {
	return Snapshot{NodeID: 1, Voter: true, Active: true, Leader: 1, Term: 4, MetadataOffset: 42,
		Brokers: []Broker{{ID: 1, Epoch: 7, Endpoint: "127.0.0.1:9092"}, {ID: 2, Epoch: 9, Endpoint: "127.0.0.1:9093", Fenced: true}},
		Topics: []Topic{{Name: "orders", ID: "abc", Partitions: []Partition{
			{Number: 0, Leader: 1, LeaderEpoch: 3, PartitionEpoch: 5, Replicas: []int32{1, 2}, ISR: []int32{1},
				Local: &ReplicaOffsets{Role: "leader", LogStart: 10, HighWatermark: 90, LogEnd: 100}, Followers: map[int32]int64{2: 97}},
			{Number: 1, Leader: -1, Replicas: []int32{2, 1}, ISR: []int32{}, ELR: []int32{2},
				Local: &ReplicaOffsets{Role: "follower", LogStart: 0, HighWatermark: 5, LogEnd: 6, FetcherLag: 2}},
		}}},
		Groups: []Group{{ID: "billing", Type: "classic", State: "Stable", ProtocolType: "consumer", Protocol: "range",
			Members: []GroupMember{{ID: "m-1", ClientID: "app", ClientHost: "/10.0.0.1"}},
			Partitions: []GroupPartition{{Topic: "orders", Partition: 0, Committed: 40, EndOffset: 90, Lag: 50, FromLeader: true},
				{Topic: "orders", Partition: 1, Committed: 3, EndOffset: 5, Lag: 2},
				{Topic: "payments", Partition: 0, Committed: 7, EndOffset: -1, Lag: -1}}}},
		GroupsOmitted: 12}, f.answers
}

func (fakeSource) Rates() []RateSample {
	return []RateSample{{At: time.Unix(1, 0), ProduceBytes: 1000, FetchBytes: 3000, ProduceRequests: 2, FetchRequests: 6},
		{At: time.Unix(2, 0), ProduceBytes: 2500, FetchBytes: 7500, ProduceRequests: 5, FetchRequests: 15}}
}

func get(t *testing.T, handler http.Handler, path string) (int, string) {
	t.Helper()
	recorder := httptest.NewRecorder()
	handler.ServeHTTP(recorder, httptest.NewRequest(http.MethodGet, path, nil))
	body, _ := io.ReadAll(recorder.Result().Body)
	return recorder.Code, string(body)
}

func TestPagesShowTheNode(t *testing.T) {
	handler := Handler(fakeSource{answers: true}, 1)
	for _, page := range []struct {
		path string
		want []string
	}{
		{"/", []string{"the active controller", "raft term 4", "127.0.0.1:9093", `<span class="bad">fenced</span>`,
			`<a href="/topic/orders">orders</a>`, "</a></td><td>2</td><td>2</td>" /* partitions, replication factor */, "bytes per second (max 7.5k B/s)"}},
		{"/topic/orders", []string{"<title>tide: topic orders</title>", "leader epoch 3, partition epoch 5", "ISR [1]",
			"hw 90, leo 100", "leo 97, lag 3", "none (offline)", "ELR [2]", "offsets known to its broker"}},
		{"/topic/orders", []string{"hw 5, leo 6, fetcher lag 2"}},
		{"/groups", []string{`<h3 id="group-billing">billing</h3>`, "state <b>Stable</b>", "protocol range", "1 member <code>m-1</code> (app /10.0.0.1)",
			"total lag 52", `<td>40</td>`, `<td>90</td>`, `<td>5 (as a follower)</td>`, "not hosted here", "lag 50, at 40 of 90",
			"12 group partitions left out"}},
		{"/rates", []string{"requests per second (max 15 req/s)", "<polyline"}},
		{"/scenarios", []string{`<a href="/scenario/kafka-7128">kafka-7128</a>`, "with the rule off"}},
	} {
		code, body := get(t, handler, page.path)
		if code != http.StatusOK {
			t.Fatalf("%s: %d %s", page.path, code, body)
		}
		for _, want := range page.want {
			if !strings.Contains(body, want) {
				t.Errorf("%s lacks %q:\n%s", page.path, want, body)
			}
		}
	}
	if code, _ := get(t, handler, "/topic/nothing"); code != http.StatusNotFound {
		t.Errorf("an unknown topic answered %d", code)
	}
	if code, _ := get(t, Handler(fakeSource{answers: false}, 1), "/"); code != http.StatusServiceUnavailable {
		t.Errorf("a node that does not answer gave %d", code)
	}
}

// TestScenarioTimeline replays a seed scenario both ways and draws its
// states: the verdict says safe with the rule on and lost offsets without.
func TestScenarioTimeline(t *testing.T) {
	handler := Handler(fakeSource{answers: true}, 1)
	_, safe := get(t, handler, "/scenario/kafka-7128")
	_, legacy := get(t, handler, "/scenario/kafka-7128?legacy=1")
	for name, page := range map[string]string{"safe": safe, "legacy": legacy} {
		if strings.Count(page, `<svg class="replicas"`) < 6 || !strings.Contains(page, `id="timeline"`) || !strings.Contains(page, "&gt; crash broker=1") {
			t.Errorf("the %s replay draws too little:\n%s", name, page)
		}
	}
	if !strings.Contains(safe, `id="verdict" class="ok"`) || !strings.Contains(legacy, `id="verdict" class="bad">verdict: committed offsets`) {
		t.Errorf("verdicts: safe page %q, legacy page %q", excerpt(safe, "verdict"), excerpt(legacy, "verdict"))
	}
	if code, _ := get(t, handler, "/scenario/no-such"); code != http.StatusNotFound {
		t.Errorf("an unknown scenario answered %d", code)
	}
}

func excerpt(page, near string) string {
	i := strings.Index(page, near)
	if i < 0 {
		return ""
	}
	return page[i:min(len(page), i+120)]
}

func TestParseScenarioSteps(t *testing.T) {
	run := parseScenario("# intro line one\n# line two\n> cluster brokers=3\n\n# State 1.\n> state\nISR: (r1)  Leader: r1  leader-epoch=0 partition-epoch=0\n" +
		"r1: [hw=10, leo=12] leader epoch=0 epochs=0@0\nr2: [hw=4, leo=4] offline epoch=0 epochs=\n> tick\nverdict: safe\n")
	if run.Intro != "intro line one line two" || len(run.Steps) != 3 {
		t.Fatalf("intro %q, %d steps: %+v", run.Intro, len(run.Steps), run.Steps)
	}
	state := run.Steps[1]
	if state.Comment != "State 1." || state.Header != "ISR: (r1)  Leader: r1  leader-epoch=0 partition-epoch=0" ||
		!strings.Contains(string(state.Drawing), "hw=10 leo=12 epoch=0") || !strings.Contains(string(state.Drawing), "r2 offline") {
		t.Fatalf("state step: %+v", state)
	}
}
