package testagent

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// What evictd serves on /metrics against what docs/METRICS.md's table
// says of it: a test of the vocabulary from a real registry, not from the
// tables the registry is built from.

// Series is one exposed series: its family's name and its labels.
type Series struct {
	Family string
	Labels map[string]string
}

// freeLabels are labels whose values are not a vocabulary: the build's.
var freeLabels = map[string]bool{"version": true, "revision": true, "goversion": true}

// ParseExposition reads the Prometheus text format into its series, each
// under its family's name: a histogram's or summary's _bucket, _sum and
// _count under the family's, without their le and quantile labels.
func ParseExposition(text string) ([]Series, error) {
	types := map[string]string{}
	var out []Series
	sc := bufio.NewScanner(strings.NewReader(text))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if f := strings.Fields(line); len(f) == 4 && f[0] == "#" && f[1] == "TYPE" {
			types[f[2]] = f[3]
			continue
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, labels, err := parseSeries(line)
		if err != nil {
			return nil, err
		}
		family := name
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(name, suffix); ok && (types[base] == "histogram" || types[base] == "summary") {
				family = base
			}
		}
		if family != name {
			delete(labels, "le")
			delete(labels, "quantile")
		}
		out = append(out, Series{Family: family, Labels: labels})
	}
	return out, sc.Err()
}

// parseSeries parses `name{a="x",b="y"} value`.
func parseSeries(line string) (string, map[string]string, error) {
	labels := map[string]string{}
	i := strings.IndexAny(line, "{ ")
	if i < 0 {
		return "", nil, fmt.Errorf("metrics line %q: no value", line)
	}
	name, rest := line[:i], line[i:]
	if !strings.HasPrefix(rest, "{") {
		return name, labels, nil
	}
	rest = rest[1:]
	for !strings.HasPrefix(rest, "}") {
		k, v, ok := strings.Cut(rest, "=")
		if !ok || !strings.HasPrefix(v, `"`) {
			return "", nil, fmt.Errorf("metrics line %q: bad labels", line)
		}
		// The value is a quoted string with \\, \" and \n escapes.
		end := 1
		for ; end < len(v) && v[end] != '"'; end++ {
			if v[end] == '\\' {
				end++
			}
		}
		if end >= len(v) {
			return "", nil, fmt.Errorf("metrics line %q: unterminated label value", line)
		}
		val, err := strconv.Unquote(v[:end+1])
		if err != nil {
			return "", nil, fmt.Errorf("metrics line %q: label %s: %w", line, k, err)
		}
		labels[k] = val
		rest = strings.TrimPrefix(v[end+1:], ",")
	}
	return name, labels, nil
}

// MetricsDoc is docs/METRICS.md's table of families: for each, the labels
// its row names and the row's text, where the values of its labels are
// named.
type MetricsDoc struct {
	rows  map[string]docRow
	table string // every row, where the signal label's values are named
}

type docRow struct {
	labels []string
	text   string
}

// LoadMetricsDoc reads the table of the metrics document at path: the rows
// whose first cell names families in backquotes, `evictd_…`.
func LoadMetricsDoc(path string) (*MetricsDoc, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	d := &MetricsDoc{rows: map[string]docRow{}}
	name := regexp.MustCompile("`(evictd_[a-z_]+)`")
	for _, line := range strings.Split(string(data), "\n") {
		if !strings.HasPrefix(line, "| `evictd_") {
			continue
		}
		// | families | labels | meaning |, the meaning with any | of its own.
		cells := strings.Split(strings.TrimSpace(line), "|")
		if len(cells) < 5 {
			return nil, fmt.Errorf("%s: a row of fewer than three cells: %q", path, line)
		}
		cells = cells[1 : len(cells)-1]
		row := docRow{labels: labelNames(cells[1]), text: strings.Join(cells[1:], "|")}
		for _, m := range name.FindAllStringSubmatch(cells[0], -1) {
			d.rows[m[1]] = row
		}
		d.table += line + "\n"
	}
	if len(d.rows) == 0 {
		return nil, fmt.Errorf("%s: no table of evictd_ families", path)
	}
	return d, nil
}

// labelNames are the labels a row's labels cell names: "signal, kind
// (hard, soft)" → signal, kind.
func labelNames(cell string) []string {
	var names []string
	depth, start := 0, 0
	cell += ","
	for i, r := range cell {
		switch {
		case r == '(':
			depth++
		case r == ')':
			depth--
		case r == ',' && depth == 0:
			if f := strings.Fields(cell[start:i]); len(f) > 0 {
				names = append(names, f[0])
			}
			start = i + 1
		}
	}
	return names
}

// Families are the families the table documents.
func (d *MetricsDoc) Families() []string {
	var out []string
	for f := range d.rows {
		out = append(out, f)
	}
	slices.Sort(out)
	return out
}

// Undocumented says what of series the table does not document, once
// each: an evictd_ family without a row, a label its row does not name, a
// value of a label its row does not name as a word (of the signal label:
// that the table does not, "memory.pressure.*" naming every stall signal;
// eviction_signal's alike). The build's labels (version, revision,
// goversion) take any value.
func (d *MetricsDoc) Undocumented(series []Series) []string {
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, s := range series {
		if !strings.HasPrefix(s.Family, "evictd_") {
			continue
		}
		row, ok := d.rows[s.Family]
		if !ok {
			add(s.Family + ": served, and not in the table")
			continue
		}
		for label, v := range s.Labels {
			switch {
			case !slices.Contains(row.labels, label):
				add(fmt.Sprintf("%s: label %s served, and its row names the labels %v", s.Family, label, row.labels))
			case freeLabels[label]:
			case label == "signal" || label == "eviction_signal":
				if !names(d.table, v) {
					add(fmt.Sprintf("%s: signal=%q served, and the table names no such signal", s.Family, v))
				}
			case !names(row.text, v):
				add(fmt.Sprintf("%s: %s=%q served, and its row does not name the value: %q", s.Family, label, v, row.text))
			}
		}
	}
	slices.Sort(out)
	return out
}

// Unserved says which families of the table have no series, except those
// explained (family → why this run serves none), and which explained
// families were served after all (the explanation is out of date).
func (d *MetricsDoc) Unserved(series []Series, explained map[string]string) []string {
	served := map[string]bool{}
	for _, s := range series {
		served[s.Family] = true
	}
	var out []string
	for _, f := range d.Families() {
		why, ok := explained[f]
		switch {
		case served[f] && ok:
			out = append(out, fmt.Sprintf("%s: served, though explained as not (%s)", f, why))
		case !served[f] && !ok:
			out = append(out, f+": documented, and not served")
		}
	}
	for f := range explained {
		if _, ok := d.rows[f]; !ok {
			out = append(out, f+": explained, and not in the table")
		}
	}
	slices.Sort(out)
	return out
}

// names reports whether text names v as a word of its own, in backquotes
// or not: not as a part of a longer value (evict in evicted). A word
// ending in ".*" names every value it begins.
func names(text, v string) bool {
	word := `(^|[\s:,(/` + "`" + `])` + regexp.QuoteMeta(v) + `($|[\s,.;:)/` + "`" + `])`
	if regexp.MustCompile(word).MatchString(text) {
		return true
	}
	for _, m := range regexp.MustCompile(`([A-Za-z.]+)\.\*`).FindAllStringSubmatch(text, -1) {
		if strings.HasPrefix(v, m[1]+".") {
			return true
		}
	}
	return false
}
