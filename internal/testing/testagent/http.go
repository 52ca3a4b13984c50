package testagent

import (
	"bufio"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// WaitHTTP polls url until it answers 200 or 20 s pass, and returns the
// body.
func WaitHTTP(t testing.TB, url string) string {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	// A listener nobody accepts on holds a request forever.
	c := &http.Client{Timeout: 5 * time.Second}
	for {
		resp, err := c.Get(url)
		if err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return string(body)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not answer 200 in time (last error %v)", url, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ParseMetrics reads the Prometheus text of /metrics into a map from the
// series (name and labels as exposed) to its value.
func ParseMetrics(t testing.TB, text string) map[string]float64 {
	t.Helper()
	m := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(text))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "#") || line == "" {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		m[line[:i]] = v
	}
	return m
}
