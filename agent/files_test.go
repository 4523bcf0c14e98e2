package main

import (
	"io"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func q(path string) string { return url.QueryEscape(path) }

func TestFileStatAndList(t *testing.T) {
	ta := startTestAgent(t, "", nil)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "b.txt"), []byte("hello"), 0o640)
	os.Mkdir(filepath.Join(dir, "a-dir"), 0o755)
	os.Symlink("b.txt", filepath.Join(dir, "c-link"))
	syscall.Mkfifo(filepath.Join(dir, "d-fifo"), 0o644)

	var stat fileStat
	ta.call("GET", "/v1/files/stat?path="+q(filepath.Join(dir, "b.txt")), nil, 200, &stat)
	if stat.Type != "file" || stat.Size != 5 || stat.Mode != 0o640 || stat.ModifiedAt == 0 {
		t.Fatalf("stat %+v", stat)
	}
	for name, kind := range map[string]string{"a-dir": "directory", "c-link": "symlink", "d-fifo": "other"} {
		ta.call("GET", "/v1/files/stat?path="+q(filepath.Join(dir, name)), nil, 200, &stat)
		if stat.Type != kind {
			t.Errorf("%s: %s, want %s", name, stat.Type, kind)
		}
	}

	var list struct{ Data []directoryEntry }
	ta.call("GET", "/v1/files/list?path="+q(dir), nil, 200, &list)
	var names []string
	for _, entry := range list.Data {
		names = append(names, entry.Name+":"+entry.Type)
	}
	if strings.Join(names, " ") != "a-dir:directory b.txt:file c-link:symlink" || list.Data[1].Size != 5 {
		t.Fatalf("list %v", list.Data)
	}

	for _, c := range []struct {
		path   string
		status int
		code   string
	}{
		{"/v1/files/list?path=" + q(filepath.Join(dir, "b.txt")), 409, "conflict"},
		{"/v1/files/list?path=" + q(filepath.Join(dir, "missing")), 404, "not_found"},
		{"/v1/files/stat?path=" + q(filepath.Join(dir, "missing")), 404, "not_found"},
		{"/v1/files/stat?path=" + q(filepath.Join(dir, "b.txt", "under-a-file")), 404, "not_found"},
		{"/v1/files/stat?path=relative", 400, "invalid_request"},
		{"/v1/files/stat", 400, "invalid_request"},
	} {
		if code := ta.errorCode("GET", c.path, nil, c.status); code != c.code {
			t.Errorf("%s: %s", c.path, code)
		}
	}
}

func TestFileReadWriteAppend(t *testing.T) {
	ta := startTestAgent(t, "", nil)
	dir := t.TempDir()
	path := filepath.Join(dir, "new", "deeper", "file.txt")
	ta.call("PUT", "/v1/files/content?path="+q(path), []byte("first"), 204, nil)
	ta.call("PUT", "/v1/files/content?path="+q(path)+"&append=1", []byte(" second"), 204, nil)

	response := ta.request("GET", "/v1/files/content?path="+q(path), nil)
	data, _ := io.ReadAll(response.Body)
	response.Body.Close()
	if response.StatusCode != 200 || string(data) != "first second" || response.ContentLength != 12 || response.Header.Get("Content-Type") != "application/octet-stream" {
		t.Fatalf("read %d %q (length %d)", response.StatusCode, data, response.ContentLength)
	}
	ta.call("PUT", "/v1/files/content?path="+q(path)+"&append=0", []byte("replaced"), 204, nil)
	if data, _ := os.ReadFile(path); string(data) != "replaced" {
		t.Fatalf("replaced: %q", data)
	}

	// A symlink to a file is followed.
	os.Symlink(path, filepath.Join(dir, "link"))
	response = ta.request("GET", "/v1/files/content?path="+q(filepath.Join(dir, "link")), nil)
	data, _ = io.ReadAll(response.Body)
	response.Body.Close()
	if string(data) != "replaced" {
		t.Fatalf("through the link: %q", data)
	}

	var refused struct{ Error, Message, Type string }
	ta.call("GET", "/v1/files/content?path="+q(dir), nil, 409, &refused)
	if refused.Error != "conflict" || refused.Type != "directory" {
		t.Fatalf("a directory: %+v", refused)
	}
	syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644)
	ta.call("GET", "/v1/files/content?path="+q(filepath.Join(dir, "fifo")), nil, 409, &refused)
	if refused.Type != "other" {
		t.Fatalf("a fifo: %+v", refused)
	}
	ta.errorCode("GET", "/v1/files/content?path="+q(filepath.Join(dir, "missing")), nil, 404)

	// A directory where a file is needed, and a file where a directory is.
	ta.call("PUT", "/v1/files/content?path="+q(dir), []byte("x"), 409, &refused)
	if !strings.Contains(refused.Message, "directory") {
		t.Fatalf("message %q", refused.Message)
	}
	ta.call("PUT", "/v1/files/content?path="+q(filepath.Join(path, "under")), []byte("x"), 409, &refused)
	if !strings.Contains(refused.Message, "is a file") {
		t.Fatalf("message %q", refused.Message)
	}
	ta.errorCode("PUT", "/v1/files/content?path="+q(path)+"&append=maybe", []byte("x"), 400)
}

func TestFileDelete(t *testing.T) {
	ta := startTestAgent(t, "", nil)
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	tree := filepath.Join(dir, "tree")
	os.WriteFile(file, []byte("x"), 0o644)
	os.MkdirAll(filepath.Join(tree, "inner"), 0o755)
	os.WriteFile(filepath.Join(tree, "inner", "leaf"), []byte("x"), 0o644)

	ta.call("DELETE", "/v1/files?path="+q(file), nil, 204, nil)
	ta.errorCode("DELETE", "/v1/files?path="+q(file), nil, 404)
	ta.errorCode("DELETE", "/v1/files?path="+q(tree), nil, 409)
	ta.errorCode("DELETE", "/v1/files?path="+q(tree)+"&recursive=0", nil, 409)
	ta.call("DELETE", "/v1/files?path="+q(tree)+"&recursive=1", nil, 204, nil)
	if _, err := os.Stat(tree); !os.IsNotExist(err) {
		t.Fatal("the tree is still there")
	}
}
