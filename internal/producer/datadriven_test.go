package producer

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/cockroachdb/datadriven"

	"github.com/tidelog/tide/internal/record"
)

// TestDatadriven runs the scripts in testdata/: produce requests checked by
// a leader, batches replicated to a follower, truncations and rebuilds,
// each with what the state answered and did.
//
// Commands:
//
//	produce      one batch per input line, all in one request: checked with
//	             CheckBatches, appended at the log end if the answer is append
//	replicate    one batch per line, appended without checks, as a follower
//	truncate offset=N
//	             the log keeps [0, N); the state is cut or rebuilt
//	state
//
// Batch lines: pid=P epoch=E seq=S count=C [transactional], or plain count=C.
func TestDatadriven(t *testing.T) {
	datadriven.Walk(t, "testdata", func(t *testing.T, path string) {
		script := &script{state: New()}
		datadriven.RunTest(t, path, func(t *testing.T, d *datadriven.TestData) string {
			switch d.Cmd {
			case "produce":
				return script.produce(t, d.Input)
			case "replicate":
				for _, header := range parseBatches(t, d.Input) {
					script.append(header)
				}
				return script.state.Describe()
			case "truncate":
				var offset int64
				d.ScanArgs(t, "offset", &offset)
				return script.truncate(t, record.Offset(offset))
			case "state":
				return script.state.Describe()
			}
			t.Fatalf("unknown command %q", d.Cmd)
			return ""
		})
	})
}

// script is a partition log of batch headers and its producer state.
type script struct {
	log   []record.Header
	state *State
}

func (s *script) end() record.Offset {
	if len(s.log) == 0 {
		return 0
	}
	return s.log[len(s.log)-1].NextOffset()
}

func (s *script) append(header record.Header) record.Header {
	header.BaseOffset = s.end()
	s.log = append(s.log, header)
	s.state.Update(header)
	return header
}

func (s *script) produce(t *testing.T, input string) string {
	headers := parseBatches(t, input)
	result := s.state.CheckBatches(headers, s.end())
	if result.Verdict != Append {
		return result.String() + "\n"
	}
	var out strings.Builder
	for _, header := range headers {
		header = s.append(header)
		fmt.Fprintf(&out, "append at %d..%d\n", header.BaseOffset, header.LastOffset())
	}
	return out.String()
}

func (s *script) truncate(t *testing.T, offset record.Offset) string {
	keep := 0
	for keep < len(s.log) && s.log[keep].NextOffset() <= offset {
		keep++
	}
	s.log = s.log[:keep]
	if s.state.TruncateTo(offset) {
		return "cut in place\n" + s.state.Describe()
	}
	rebuilt, err := Rebuild(s.log)
	if err != nil {
		t.Fatal(err)
	}
	s.state = rebuilt
	return fmt.Sprintf("rebuilt from %d batches\n", len(s.log)) + s.state.Describe()
}

func parseBatches(t *testing.T, input string) []record.Header {
	var headers []record.Header
	for _, line := range strings.Split(strings.TrimSpace(input), "\n") {
		header := batch(NoProducerID, NoProducerEpoch, NoSequence, 1)
		for _, field := range strings.Fields(line) {
			key, value, _ := strings.Cut(field, "=")
			number, err := strconv.ParseInt(value, 10, 64)
			if key != "transactional" && err != nil {
				t.Fatalf("%q: %v", field, err)
			}
			switch key {
			case "pid":
				header.ProducerID = number
			case "epoch":
				header.ProducerEpoch = int16(number)
			case "seq":
				header.BaseSequence = int32(number)
			case "count":
				header.LastOffsetDelta, header.RecordCount = int32(number-1), int32(number)
			case "transactional":
				header.Attributes |= 0x10
			default:
				t.Fatalf("unknown field %q", field)
			}
		}
		headers = append(headers, header)
	}
	return headers
}
