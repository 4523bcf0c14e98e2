package main

import (
	"bufio"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// nextChange reads watch lines until one of the type for the path comes, failing after a while.
func nextChange(t *testing.T, lines *bufio.Reader, kind, path string) {
	t.Helper()
	found := make(chan bool)
	go func() {
		for {
			data, err := lines.ReadBytes('\n')
			if err != nil {
				found <- false
				return
			}
			var line changeLine
			json.Unmarshal(data, &line)
			if line.Type == kind && line.Path == path && line.At > 0 {
				found <- true
				return
			}
		}
	}()
	select {
	case ok := <-found:
		if !ok {
			t.Fatalf("the watch ended before %s %s", kind, path)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("no %s of %s", kind, path)
	}
}

func TestWatchSeesChanges(t *testing.T) {
	ta := startTestAgent(t, "", nil)
	dir := t.TempDir()
	response := ta.request("GET", "/v1/files/watch?recursive=1&path="+q(dir), nil)
	defer response.Body.Close()
	lines := bufio.NewReader(response.Body)
	if first, _ := lines.ReadBytes('\n'); string(first) != "{\"type\":\"ready\"}\n" {
		t.Fatalf("first line %q", first)
	}

	file := filepath.Join(dir, "new.txt")
	os.WriteFile(file, nil, 0o644)
	nextChange(t, lines, "create", file)
	os.WriteFile(file, []byte("more"), 0o644)
	nextChange(t, lines, "write", file)

	// A directory made after the watch began is watched too.
	sub := filepath.Join(dir, "sub")
	os.Mkdir(sub, 0o755)
	nextChange(t, lines, "create", sub)
	deep := filepath.Join(sub, "deep.txt")
	os.WriteFile(deep, []byte("x"), 0o644)
	nextChange(t, lines, "create", deep)
	os.Remove(deep)
	nextChange(t, lines, "remove", deep)
}

func TestWatchOfAMissingPath(t *testing.T) {
	ta := startTestAgent(t, "", nil)
	ta.errorCode("GET", "/v1/files/watch?path="+q(filepath.Join(t.TempDir(), "missing")), nil, 404)
}
