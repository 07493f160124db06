package wire

import (
	"bytes"
	crand "crypto/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/tidelog/tide/internal/replica"
)

// fileBackend answers fetches like fakeBackend, but with each partition's
// records written to a file and handed out as a file range, split in two
// ranges when it can be, as a log with two segments would.
type fileBackend struct {
	*fakeBackend
	dir   string
	files []*os.File
}

func (f *fileBackend) FetchFiles(request FetchRequest, done func([]replica.FetchResponse, [][]FileRange)) {
	f.fakeBackend.Fetch(request, func(answers []replica.FetchResponse) {
		ranges := make([][]FileRange, len(answers))
		for i := range answers {
			records := answers[i].Records
			if len(records) == 0 {
				continue
			}
			file, err := os.CreateTemp(f.dir, "segment")
			if err != nil {
				panic(err)
			}
			f.files = append(f.files, file)
			padding := []byte("before the records")
			file.Write(padding)
			file.Write(records)
			half := int64(len(records) / 2)
			ranges[i] = []FileRange{{File: file, Position: int64(len(padding)), Size: half},
				{File: file, Position: int64(len(padding)) + half, Size: int64(len(records)) - half}}
			answers[i].Records = nil
		}
		done(answers, ranges)
	})
}

// A fetch answered with file ranges is, once its splices are written in,
// byte for byte the response the same records give in memory, at every
// version; so is what Handle flattens.
func TestSplicedFetchMatchesTheWholeEncoding(t *testing.T) {
	for _, version := range testVersions(t, 1) {
		plain := newFakeBackend()
		plain.addTopic("orders", 2, 5)
		storedBatches(t, plain)
		files := &fileBackend{fakeBackend: newFakeBackend(), dir: t.TempDir()}
		files.addTopic("orders", 2, 5)
		storedBatches(t, files.fakeBackend)
		fetch := testFetchRequest(version, 0, 5)
		fetchByTopicID(plain, fetch) // both backends give orders one id
		request := encodeRequest(fetch, testCorrelationID)

		want, err := call(t, newTestHandler(t, plain), request)
		if err != nil {
			t.Fatal(err)
		}
		var spliced Response
		newTestHandler(t, files).HandleSpliced(append([]byte(nil), request...), func(r Response, err error) {
			if err != nil {
				t.Fatal(err)
			}
			spliced = r
		})
		if len(spliced.Splices) != 1 || len(spliced.Splices[0].Ranges) != 2 {
			t.Fatalf("v%d: splices %+v, want one partition's records in two file ranges", version, spliced.Splices)
		}
		got, err := spliced.Flatten()
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) || spliced.Size() != int64(len(want)) {
			t.Fatalf("v%d: spliced response differs from the whole encoding (%d and %d bytes)", version, len(got), len(want))
		}
		flattened, err := call(t, newTestHandler(t, files), request)
		if err != nil || !bytes.Equal(flattened, want) {
			t.Fatalf("v%d: Handle over a FileFetcher differs from the whole encoding (%v)", version, err)
		}
	}
}

// A marker that is not where it must be (bytes that happen to hold it, or
// none at all) makes splice refuse, so the response is encoded whole.
func TestSpliceRefusesMisplacedMarkers(t *testing.T) {
	m := newMarkers(crand.Reader)
	sets := []Splice{{Bytes: []byte("a")}, {Bytes: []byte("b")}}
	good := append(append(append([]byte{1, 2, 3, 17}, m.marker(0)...), 17), m.marker(1)...)
	response, ok := m.splice(good, sets, true)
	if !ok || len(response.Splices) != 2 {
		t.Fatalf("well-placed markers refused")
	}
	if flat, _ := response.Flatten(); !bytes.Equal(flat, []byte{1, 2, 3, 2, 'a', 2, 'b'}) {
		t.Fatalf("spliced %v", flat)
	}
	for name, encoded := range map[string][]byte{
		"missing":      append([]byte{1, 2, 3, 17}, m.marker(0)...),
		"out of order": append(append([]byte{17}, m.marker(1)...), append([]byte{17}, m.marker(0)...)...),
		"no prefix":    append(m.marker(0), m.marker(1)...),
	} {
		if _, ok := m.splice(encoded, sets, true); ok {
			t.Errorf("%s: splice accepted", name)
		}
	}
}

// A range the file no longer holds (a truncated segment) fails Flatten.
func TestFlattenShortFile(t *testing.T) {
	file, err := os.Create(filepath.Join(t.TempDir(), "short"))
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	file.Write([]byte("abc"))
	if _, err := (Response{Bytes: []byte{0}, Splices: []Splice{{At: 1, Ranges: []FileRange{{File: file, Size: 10}}}}}).Flatten(); err == nil {
		t.Fatal("a short file flattened")
	}
}
