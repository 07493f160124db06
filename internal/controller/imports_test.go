package controller

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPure keeps the package a pure core (STYLE.md rules 1 and 15): the
// simulator replays a controller's decisions from a seed only if deciding
// touches no clock, file, socket, randomness or goroutine.
func TestPure(t *testing.T) {
	forbidden := []string{"net", "os", "time", "math/rand", "crypto/rand", "sync", "syscall", "log", "io/fs", "unsafe"}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, file := range files {
		if strings.HasSuffix(file, "_test.go") {
			continue
		}
		fileSet := token.NewFileSet()
		parsed, err := parser.ParseFile(fileSet, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, spec := range parsed.Imports {
			path, _ := strconv.Unquote(spec.Path.Value)
			for _, prefix := range forbidden {
				if path == prefix || strings.HasPrefix(path, prefix+"/") {
					t.Errorf("%s imports %q; package controller is pure", file, path)
				}
			}
		}
		ast.Inspect(parsed, func(node ast.Node) bool {
			if statement, ok := node.(*ast.GoStmt); ok {
				t.Errorf("%s: go statement; package controller starts no goroutines", fileSet.Position(statement.Pos()))
			}
			return true
		})
	}
}
