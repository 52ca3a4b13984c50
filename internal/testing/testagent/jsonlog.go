package testagent

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// DuplicateKey returns the first key that one object of the JSON value in
// line holds twice, with its path, or "" when there is none. Decoding into
// a map would keep the last and hide the first.
func DuplicateKey(line []byte) (string, error) {
	dec := json.NewDecoder(bytes.NewReader(line))
	var walk func(path string) (string, error)
	walk = func(path string) (string, error) {
		tok, err := dec.Token()
		if err != nil {
			return "", err
		}
		switch tok {
		case json.Delim('{'):
			seen := map[string]bool{}
			for dec.More() {
				k, err := dec.Token()
				if err != nil {
					return "", err
				}
				key := k.(string)
				if seen[key] {
					return path + key, nil
				}
				seen[key] = true
				if dup, err := walk(path + key + "."); dup != "" || err != nil {
					return dup, err
				}
			}
			_, err = dec.Token() // '}'
			return "", err
		case json.Delim('['):
			for dec.More() {
				if dup, err := walk(path); dup != "" || err != nil {
					return dup, err
				}
			}
			_, err = dec.Token() // ']'
			return "", err
		}
		return "", nil
	}
	dup, err := walk("")
	if dup == "" && err == nil && dec.More() {
		err = errors.New("more than one JSON value")
	}
	return dup, err
}

// CheckJSONLogs fails t for each line of out that is not one JSON object,
// or holds a key twice in one object.
func CheckJSONLogs(t testing.TB, out string) {
	t.Helper()
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		if !strings.HasPrefix(l, "{") {
			t.Errorf("log line is not a JSON object: %s", l)
			continue
		}
		if dup, err := DuplicateKey([]byte(l)); dup != "" || err != nil {
			t.Errorf("key %q twice (%v): %s", dup, err, l)
		}
	}
}
