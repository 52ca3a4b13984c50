package ranking

import (
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestPureImports keeps the package pure: standard library (minus the file
// system and the OS) and the signals package only.
func TestPureImports(t *testing.T) {
	forbidden := map[string]bool{
		"os": true, "os/exec": true, "io/fs": true, "io/ioutil": true,
		"syscall": true, "path/filepath": true, "net": true, "unsafe": true,
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatalf("list package files: %v", err)
	}
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatalf("parse %s: %v", name, err)
		}
		checked++
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			first, _, _ := strings.Cut(path, "/")
			thirdParty := strings.Contains(first, ".")
			if forbidden[path] || (thirdParty && path != "github.com/evictd/evictd/signals") {
				t.Errorf("%s imports %q; ranking must stay pure", name, path)
			}
		}
	}
	if checked == 0 {
		t.Fatal("found no package files to check")
	}
}
