package docs

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// citedTestRE matches a Go test's name as the documentation cites it,
// `TestMemoryNode` or TestMemoryNode/allocatable (the part before the
// slash).
var citedTestRE = regexp.MustCompile(`\bTest[A-Z][A-Za-z0-9_]*`)

// declaredTestRE matches the declaration of a top-level test function.
var declaredTestRE = regexp.MustCompile(`(?m)^func (Test[A-Za-z0-9_]*)\(`)

// declaredTests returns the test functions the repository's _test.go files
// declare, leaving out the git-ignored cache (.cache holds other modules'
// sources) and other hidden directories.
func declaredTests(t *testing.T) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if (path != root && strings.HasPrefix(d.Name(), ".")) || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(d.Name(), "_test.go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range declaredTestRE.FindAllSubmatch(data, -1) {
			out[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatalf("walk the repository: %v", err)
	}
	if !out["TestRelativeLinksResolve"] {
		t.Fatalf("found %d tests, not this package's own: the walk is wrong", len(out))
	}
	return out
}

// TestCitedTestsExist fails for every test the documentation names that
// no _test.go file of the repository declares, so that a document, and
// above all COMPATIBILITY.md's "tested" cells, cannot keep citing a test
// that was renamed or removed.
func TestCitedTestsExist(t *testing.T) {
	declared := declaredTests(t)
	cited := 0
	for _, doc := range documents(t) {
		rel, _ := filepath.Rel(root, doc)
		data, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for n, line := range strings.Split(string(data), "\n") {
			for _, name := range citedTestRE.FindAllString(line, -1) {
				cited++
				if !declared[name] {
					t.Errorf("%s:%d: %s: no _test.go file declares it", rel, n+1, name)
				}
			}
		}
	}
	if cited == 0 {
		t.Fatal("found no test cited; the pattern or the file list is wrong")
	}
	t.Logf("%d citations of tests checked against %d tests", cited, len(declared))
}

// TestMatrixTestedCellsNameATest fails for every cell of COMPATIBILITY.md's
// tables that says **tested** and names no test.
func TestMatrixTestedCellsNameATest(t *testing.T) {
	const matrix = "COMPATIBILITY.md"
	data, err := os.ReadFile(filepath.Join(root, "docs", matrix))
	if err != nil {
		t.Fatal(err)
	}
	tested := 0
	for n, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "|") {
			continue
		}
		for _, cell := range strings.Split(strings.Trim(line, "|"), "|") {
			if !strings.Contains(cell, "**tested**") {
				continue
			}
			tested++
			// A cell may hold a tested part and a documented one: the
			// test must come after the mark.
			_, after, _ := strings.Cut(cell, "**tested**")
			if !citedTestRE.MatchString(after) {
				t.Errorf("%s:%d: a cell says tested and names no test: %q", matrix, n+1, strings.TrimSpace(cell))
			}
		}
	}
	if tested == 0 {
		t.Fatalf("%s: no cell says **tested**; the matrix or this test is wrong", matrix)
	}
}
