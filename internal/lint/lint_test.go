package lint

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const module = "github.com/tidelog/tide"

// pure are the packages that must do no I/O and keep no time or randomness
// of their own, so the broker and the simulator can drive the same code
// (DESIGN.md section 1).
var pure = []string{
	"internal/replica",
	"internal/metadata",
	"internal/controller",
	"internal/rules",
	"internal/leaderepoch",
	"internal/record",
	"internal/quorum",
	"internal/codec",
	"internal/producer",
	"internal/logconfig",
	"internal/group",
	"internal/group/assignor",
	"internal/group/reconcile",
	"internal/group/consumerheartbeat",
}

// runtimeFree are the packages between the runtimes and the pure cores:
// the Kafka protocol, the front end, the replica fetcher and the broker.
// They decide what a request gets and how replicas converge, so the server
// and the simulator must run them alike (DESIGN.md section 1): like the
// pure packages they keep no clock, randomness, goroutines, sockets or
// files of their own, but they may reach storage through its seam
// (internal/disk's FS and the partition log over it), which the runtime
// hands them.
var runtimeFree = []string{
	"internal/wire",
	"internal/frontend",
	"internal/fetcher",
	"internal/broker",
}

// storage are the packages a runtime-free package may use for the logs the
// runtime gives it: the filesystem seam and the log on top of it.
var storage = []string{"internal/disk", "internal/commitlog"}

// runtimeFreeExternal are the outside packages a runtime-free package may
// import beyond the pure ones': franz-go's protocol encoding, which does no
// I/O.
var runtimeFreeExternal = []string{"github.com/twmb/franz-go/pkg/kmsg", "github.com/twmb/franz-go/pkg/kbin"}

// forbidden are imports a pure package may not use. time is allowed only for
// time.Duration, which TestPurePackagesUseNoClock checks separately.
var forbidden = []string{"net", "os", "math/rand", "math/rand/v2", "sync", "sync/atomic", "crypto/rand", "io/fs", "syscall", "unsafe", "os/exec", "net/http", "log", "log/slog"}

// allowedExternal are the modules outside tide a pure package may import:
// each is itself free of I/O.
// etcd/raft does no I/O either; the one thing it draws from outside is its
// election jitter, from crypto/rand.Reader, which the simulator points at
// its seeded source for a run (DESIGN.md section 1).
//
// The codecs internal/record decompresses produced batches with (the ones
// franz-go uses) transform bytes in memory and touch no file, socket or
// clock. zstd and lz4 can decode on goroutines of their own; record sets
// both to concurrency 1, with which they decode synchronously in the caller
// (zstd's sync stream decoder, lz4's non-concurrent reader).
//
// franz-go's kmsg and kbin encode and decode Kafka messages in memory; the
// group packages take requests and give answers as kmsg values
// (consumerheartbeat validates a kmsg.ConsumerGroupHeartbeatRequest) and
// the coordinator writes __consumer_offsets records in kmsg's encodings.
var allowedExternal = []string{"github.com/twmb/franz-go/pkg/kerr",
	"github.com/twmb/franz-go/pkg/kmsg", "github.com/twmb/franz-go/pkg/kbin",
	"go.etcd.io/raft/v3", "go.etcd.io/raft/v3/raftpb", "google.golang.org/protobuf/proto",
	"github.com/klauspost/compress/zstd", "github.com/klauspost/compress/s2", "github.com/pierrec/lz4/v4"}

// repositoryRoot is two levels above this package.
func repositoryRoot(t *testing.T) string {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// parsePackage parses the non-test Go files of a package directory.
func parsePackage(t *testing.T, dir string) []*ast.File {
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	fileSet := token.NewFileSet()
	for _, entry := range entries {
		name := entry.Name()
		if !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		file, err := parser.ParseFile(fileSet, filepath.Join(dir, name), nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			t.Fatal(err)
		}
		full, err := parser.ParseFile(fileSet, filepath.Join(dir, name), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		full.Imports = file.Imports
		files = append(files, full)
	}
	return files
}

func importsOf(files []*ast.File) []string {
	var imports []string
	for _, file := range files {
		for _, spec := range file.Imports {
			path, _ := strconv.Unquote(spec.Path.Value)
			imports = append(imports, path)
		}
	}
	slices.Sort(imports)
	return slices.Compact(imports)
}

// TestPurePackagesImportNoIO fails when a pure package imports the network,
// files, a clock source, randomness or locks, directly or through another
// tide package, starts a goroutine, or uses the clock.
func TestPurePackagesImportNoIO(t *testing.T) {
	root := repositoryRoot(t)
	for _, pkg := range pure {
		files := parsePackage(t, filepath.Join(root, pkg))
		if len(files) == 0 {
			t.Errorf("%s: no Go files; is the list out of date?", pkg)
		}
		for _, problem := range purityProblems(pkg, files) {
			t.Error(problem)
		}
	}
}

// TestRuntimeFreePackagesImportNoIO is the same check for the runtime-free
// packages, which may also use storage through its seam.
func TestRuntimeFreePackagesImportNoIO(t *testing.T) {
	root := repositoryRoot(t)
	for _, pkg := range runtimeFree {
		files := parsePackage(t, filepath.Join(root, pkg))
		if len(files) == 0 {
			t.Errorf("%s: no Go files; is the list out of date?", pkg)
		}
		for _, problem := range runtimeFreeProblems(pkg, files) {
			t.Error(problem)
		}
	}
}

// TestRuntimeFreeCheckCatchesViolations plants a violation of each kind in
// every runtime-free package in turn (a socket import, a goroutine, the
// clock, a runtime package) and checks that the check reports each: a
// package the check did not really cover would let them through.
func TestRuntimeFreeCheckCatchesViolations(t *testing.T) {
	root := repositoryRoot(t)
	planted := parsePackage(t, "testdata/impure")
	for _, pkg := range runtimeFree {
		files := append(parsePackage(t, filepath.Join(root, pkg)), planted...)
		problems := runtimeFreeProblems(pkg, files)
		for _, want := range []string{"imports os", "imports sync", "imports github.com/example/io", "starts a goroutine", "uses time.Now"} {
			if !slices.ContainsFunc(problems, func(problem string) bool { return strings.Contains(problem, want) }) {
				t.Errorf("%s: the check missed a planted %q; it found %q", pkg, want, problems)
			}
		}
		runtime := parsePackage(t, "testdata/runtime")
		if problems := runtimeFreeProblems(pkg, append(parsePackage(t, filepath.Join(root, pkg)), runtime...)); !slices.ContainsFunc(problems,
			func(problem string) bool { return strings.Contains(problem, "internal/server") }) {
			t.Errorf("%s: the check missed a planted import of the server; it found %q", pkg, problems)
		}
	}
	if problems := runtimeFreeProblems("testdata/impure", planted); slices.ContainsFunc(problems,
		func(problem string) bool { return strings.Contains(problem, "internal/disk") }) {
		t.Errorf("the storage seam is allowed in runtime-free packages, yet flagged: %q", problems)
	}
}

// runtimeFreeProblems is purityProblems with the storage seam and the
// protocol encoding allowed, and any runtime-free package.
func runtimeFreeProblems(pkg string, files []*ast.File) []string {
	var problems []string
	for _, problem := range purityProblems(pkg, files) {
		allowed := false
		for _, inner := range slices.Concat(pure, runtimeFree, storage) {
			allowed = allowed || strings.HasSuffix(problem, " imports "+module+"/"+inner+", which is not pure")
		}
		for _, external := range runtimeFreeExternal {
			allowed = allowed || strings.HasSuffix(problem, " imports "+external+", an outside package not known to be pure")
		}
		if !allowed {
			problems = append(problems, problem)
		}
	}
	return problems
}

// TestPurityCheckCatchesViolations runs the check on a package written to
// break every rule: a check that cannot fail proves nothing.
func TestPurityCheckCatchesViolations(t *testing.T) {
	problems := purityProblems("testdata/impure", parsePackage(t, "testdata/impure"))
	for _, want := range []string{"imports os", "imports sync", "imports " + module + "/internal/disk", "imports github.com/example/io", "starts a goroutine", "uses time.Now"} {
		found := false
		for _, problem := range problems {
			found = found || strings.Contains(problem, want)
		}
		if !found {
			t.Errorf("the purity check missed %q; it found %q", want, problems)
		}
	}
}

// timeConstants are the names of package time a pure package may use: the
// Duration type and its unit constants, values that read no clock.
var timeConstants = []string{"Duration", "Nanosecond", "Microsecond", "Millisecond", "Second", "Minute", "Hour"}

func purityProblems(pkg string, files []*ast.File) []string {
	var problems []string
	for _, path := range importsOf(files) {
		switch {
		case slices.Contains(forbidden, path):
			problems = append(problems, pkg+" imports "+path+": pure packages do no I/O and keep no clock, randomness or locks")
		case strings.HasPrefix(path, module+"/"):
			if inner := strings.TrimPrefix(path, module+"/"); !slices.Contains(pure, inner) {
				problems = append(problems, pkg+" imports "+path+", which is not pure")
			}
		case strings.Contains(strings.Split(path, "/")[0], ".") && !slices.Contains(allowedExternal, path):
			problems = append(problems, pkg+" imports "+path+", an outside package not known to be pure")
		}
	}
	for _, file := range files {
		ast.Inspect(file, func(node ast.Node) bool {
			switch node := node.(type) {
			case *ast.GoStmt:
				problems = append(problems, pkg+" starts a goroutine")
			case *ast.SelectorExpr:
				if ident, ok := node.X.(*ast.Ident); ok && ident.Name == "time" && !slices.Contains(timeConstants, node.Sel.Name) {
					problems = append(problems, pkg+" uses time."+node.Sel.Name+": time comes in as ticks or values")
				}
			}
			return true
		})
	}
	return problems
}

// mayDisableRules are the packages that may switch a protocol rule off:
// the simulator and the scenarios (and any test file).
var mayDisableRules = []string{"internal/sim", "internal/scenario", "internal/rules", "cmd/tide"}

// TestOnlySimulatorsSwitchRulesOff fails when production code calls
// rules.Rules.Without: a production configuration must not be able to turn
// off a rule that prevents data loss. In cmd/tide only the files of the sim
// and scenario commands may.
func TestOnlySimulatorsSwitchRulesOff(t *testing.T) {
	for _, problem := range ruleSwitchProblems(t, repositoryRoot(t)) {
		t.Error(problem)
	}
}

// TestRuleSwitchCheckCatchesViolations runs the check on a tree where a
// broker configuration switches a rule off.
func TestRuleSwitchCheckCatchesViolations(t *testing.T) {
	problems := ruleSwitchProblems(t, "testdata/rulesoff")
	if len(problems) != 2 {
		t.Fatalf("want the broker config and the serve command flagged, got %q", problems)
	}
}

func ruleSwitchProblems(t *testing.T, root string) []string {
	var problems []string
	err := filepath.WalkDir(root, func(path string, entry os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if entry.IsDir() && entry.Name() == "testdata" && path != root {
			return filepath.SkipDir
		}
		if entry.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil || !strings.Contains(string(data), ".Without(") {
			return err
		}
		relative, _ := filepath.Rel(root, filepath.Dir(path))
		allowed := false
		for _, prefix := range mayDisableRules {
			allowed = allowed || relative == prefix || strings.HasPrefix(relative, prefix+"/")
		}
		base := filepath.Base(path)
		if strings.HasPrefix(relative, "cmd/tide") && !strings.Contains(base, "sim") && !strings.Contains(base, "scenario") {
			allowed = false
		}
		if !allowed {
			problems = append(problems, path+" switches a rule off; only the simulator and the scenarios may")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return problems
}

// TestCommitlogReadsNoClock fails when the partition log reads the clock:
// segment ages and retention are measured on the time its owner passes in
// (commitlog.Log.SetClock, RetentionOffset's now), so that the
// simulator's virtual clock drives them as the wall clock does in tide
// serve. The log does files, so only its use of package time is checked.
func TestCommitlogReadsNoClock(t *testing.T) {
	files := parsePackage(t, filepath.Join(repositoryRoot(t), "internal/commitlog"))
	if len(files) == 0 {
		t.Fatal("internal/commitlog: no Go files")
	}
	for _, file := range files {
		ast.Inspect(file, func(node ast.Node) bool {
			if selector, ok := node.(*ast.SelectorExpr); ok {
				if ident, ok := selector.X.(*ast.Ident); ok && ident.Name == "time" && !slices.Contains(timeConstants, selector.Sel.Name) {
					t.Errorf("internal/commitlog uses time.%s: the log takes time as values", selector.Sel.Name)
				}
			}
			return true
		})
	}
}
