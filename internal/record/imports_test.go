package record

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestImports keeps the package pure: it parses bytes and touches no clock,
// file, socket or goroutine, and kmsg stays a test-only reference, so the
// parser cannot quietly come to depend on another codec.
func TestImports(t *testing.T) {
	allowed := map[string]bool{
		"encoding/binary": true, "errors": true, "fmt": true, "hash/crc32": true, "math": true,
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		parsed, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, spec := range parsed.Imports {
			path, _ := strconv.Unquote(spec.Path.Value)
			if !allowed[path] {
				t.Errorf("%s imports %q; package record may import only %v", file, path, allowed)
			}
		}
	}
}
