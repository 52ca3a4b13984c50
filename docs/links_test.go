package docs

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// root is the repository's root, seen from this package.
const root = ".."

// linkRE matches a Markdown inline link or image, [text](target), with an
// optional title after the target.
var linkRE = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// documents lists the Markdown files whose links are checked: the root's
// (README.md, CHANGELOG.md, SECURITY.md, ...), docs/ and deploy/ with its
// subdirectories.
func documents(t *testing.T) []string {
	t.Helper()
	var files []string
	top, err := filepath.Glob(filepath.Join(root, "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	files = append(files, top...)
	for _, dir := range []string{"docs", "deploy"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if !d.IsDir() && strings.HasSuffix(path, ".md") {
				files = append(files, path)
			}
			return nil
		})
		if err != nil {
			t.Fatalf("walk %s: %v", dir, err)
		}
	}
	if len(files) < 5 {
		t.Fatalf("found %d Markdown files (%v); want README.md, docs/ and deploy/", len(files), files)
	}
	return files
}

// link is one relative link of a document.
type link struct {
	line   int
	target string
}

// relativeLinks returns the links of the Markdown file at path that point
// into the repository, leaving out those inside fenced code blocks and
// inline code.
func relativeLinks(t *testing.T, path string) []link {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []link
	fenced := false
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range linkRE.FindAllStringSubmatch(withoutCode(line), -1) {
			target := m[1]
			if isExternal(target) {
				continue
			}
			out = append(out, link{line: n, target: target})
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return out
}

// withoutCode blanks the inline code spans of line, so that a link shown
// as code is not taken for one.
func withoutCode(line string) string {
	parts := strings.Split(line, "`")
	for i := 1; i < len(parts); i += 2 {
		if i < len(parts)-1 { // an unclosed backtick is text
			parts[i] = strings.Repeat(" ", len(parts[i]))
		}
	}
	return strings.Join(parts, "`")
}

func isExternal(target string) bool {
	for _, scheme := range []string{"http://", "https://", "mailto:"} {
		if strings.HasPrefix(target, scheme) {
			return true
		}
	}
	return false
}

// headingRE matches an ATX heading.
var headingRE = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)

// anchors returns the anchors GitHub gives the headings of the Markdown
// file at path: lowercased, punctuation other than '-' and '_' dropped,
// spaces as '-', a repeated one suffixed -1, -2, ...
func anchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		m := headingRE.FindStringSubmatch(line)
		if fenced || m == nil {
			continue
		}
		a := slug(m[1])
		if k := seen[a]; k > 0 {
			out[a+"-"+strconv.Itoa(k)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteRune('-')
		case r == '-' || r == '_':
			b.WriteRune(r)
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// TestRelativeLinksResolve fails for every relative link of the
// documentation whose file does not exist, or whose anchor names no
// heading of a Markdown file.
func TestRelativeLinksResolve(t *testing.T) {
	checked := 0
	for _, doc := range documents(t) {
		rel, _ := filepath.Rel(root, doc)
		for _, l := range relativeLinks(t, doc) {
			checked++
			file, anchor, _ := strings.Cut(l.target, "#")
			target := doc
			if file != "" {
				target = filepath.Join(filepath.Dir(doc), filepath.FromSlash(file))
			}
			if _, err := os.Stat(target); err != nil {
				t.Errorf("%s:%d: link to %s: no such file", rel, l.line, l.target)
				continue
			}
			if anchor == "" || !strings.HasSuffix(target, ".md") {
				continue
			}
			if !anchors(t, target)[anchor] {
				t.Errorf("%s:%d: link to %s: no heading with anchor #%s", rel, l.line, l.target, anchor)
			}
		}
	}
	if checked == 0 {
		t.Fatal("checked no link; the pattern or the file list is wrong")
	}
	t.Logf("%d relative links checked", checked)
}

// TestSlug pins the anchors GitHub derives from headings that the
// documentation links to.
func TestSlug(t *testing.T) {
	for _, tc := range []struct{ heading, want string }{
		{"Safety limits", "safety-limits"},
		{"memory.available: kubelet 1.37's or 1.36's", "memoryavailable-kubelet-137s-or-136s"},
		{"Memory pressure stall thresholds (PSI)", "memory-pressure-stall-thresholds-psi"},
		{"Before Kubernetes 1.36", "before-kubernetes-136"},
		{"`evictd status`", "evictd-status"},
	} {
		if got := slug(tc.heading); got != tc.want {
			t.Errorf("slug(%q) = %q, want %q", tc.heading, got, tc.want)
		}
	}
}
