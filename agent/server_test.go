package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// testAgent is an agent served in the test's process on a temporary socket,
// and a client speaking HTTP/2 with prior knowledge to it, as the service does.
type testAgent struct {
	t       *testing.T
	agent   *agent
	socket  string
	records string
	client  *http.Client
}

// startTestAgent serves an agent over records (a new directory when empty); adjust may change its config.
func startTestAgent(t *testing.T, records string, adjust func(*config)) *testAgent {
	t.Helper()
	if records == "" {
		records = t.TempDir()
	}
	cfg := defaultConfig(records)
	cfg.defaultCwd = t.TempDir()
	if adjust != nil {
		adjust(&cfg)
	}
	a, err := newAgent(cfg)
	if err != nil {
		t.Fatal(err)
	}
	// A short path: a Unix socket's path is limited to 108 bytes.
	socketDir, err := os.MkdirTemp("", "agent")
	if err != nil {
		t.Fatal(err)
	}
	socket := filepath.Join(socketDir, "sock", "agent.sock")
	listener, err := listenUnix(socket)
	if err != nil {
		t.Fatal(err)
	}
	go serve(listener, a.handler())
	client := newTestClient(socket, nil)
	t.Cleanup(func() {
		client.CloseIdleConnections()
		listener.Close()
		os.RemoveAll(socketDir)
		killRunningProcesses(a)
	})
	return &testAgent{t: t, agent: a, socket: socket, records: records, client: client}
}

// newTestClient is an HTTP/2 client over the socket; onDial, when given, sees each connection it opens.
func newTestClient(socket string, onDial func(net.Conn)) *http.Client {
	return &http.Client{Transport: &http2.Transport{
		AllowHTTP: true,
		DialTLS: func(network, address string, _ *tls.Config) (net.Conn, error) {
			conn, err := net.Dial("unix", socket)
			if err == nil && onDial != nil {
				onDial(conn)
			}
			return conn, err
		},
	}}
}

// killRunningProcesses ends what a test left running, and waits until their records are written.
func killRunningProcesses(a *agent) {
	a.procsMu.Lock()
	defer a.procsMu.Unlock()
	for _, p := range a.procs {
		p.mu.Lock()
		if p.running {
			signalGroup(p.pid, syscall.SIGKILL)
		}
		output := p.output
		p.mu.Unlock()
		if output != nil {
			output.wait(context.Background(), math.MaxInt64, 5*time.Second)
		}
	}
}

// request sends a request (body: nil, []byte, io.Reader or a value sent as JSON) and returns the response.
func (ta *testAgent) request(method, path string, body interface{}) *http.Response {
	ta.t.Helper()
	return doRequest(ta.t, ta.client, method, path, body)
}

func doRequest(t *testing.T, client *http.Client, method, path string, body interface{}) *http.Response {
	t.Helper()
	var reader io.Reader
	switch value := body.(type) {
	case nil:
	case []byte:
		reader = bytes.NewReader(value)
	case io.Reader:
		reader = value
	default:
		encoded, err := json.Marshal(value)
		if err != nil {
			t.Fatal(err)
		}
		reader = bytes.NewReader(encoded)
	}
	request, err := http.NewRequest(method, "http://agent"+path, reader)
	if err != nil {
		t.Fatal(err)
	}
	response, err := client.Do(request)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return response
}

// call sends a request, checks its status and decodes its JSON answer into answer (when not nil).
func (ta *testAgent) call(method, path string, body interface{}, status int, answer interface{}) {
	ta.t.Helper()
	response := ta.request(method, path, body)
	defer response.Body.Close()
	data, _ := io.ReadAll(response.Body)
	if response.StatusCode != status {
		ta.t.Fatalf("%s %s: status %d, want %d: %s", method, path, response.StatusCode, status, data)
	}
	if answer != nil {
		if err := json.Unmarshal(data, answer); err != nil {
			ta.t.Fatalf("%s %s: %v in %s", method, path, err, data)
		}
	}
}

// errorCode is the `error` of an error answer, checking its status.
func (ta *testAgent) errorCode(method, path string, body interface{}, status int) string {
	ta.t.Helper()
	var answer struct{ Error, Message string }
	ta.call(method, path, body, status, &answer)
	return answer.Error
}

// readLines decodes every NDJSON line of a stream.
func readLines(t *testing.T, body io.Reader) []map[string]interface{} {
	t.Helper()
	var lines []map[string]interface{}
	reader := bufio.NewReader(body)
	for {
		line, err := reader.ReadBytes('\n')
		if len(bytes.TrimSpace(line)) > 0 {
			var decoded map[string]interface{}
			if err := json.Unmarshal(line, &decoded); err != nil {
				t.Fatalf("%v in %q", err, line)
			}
			lines = append(lines, decoded)
		}
		if err != nil {
			return lines
		}
	}
}

func TestHealth(t *testing.T) {
	ta := startTestAgent(t, "", func(c *config) { c.bootID = "1234" })
	var health map[string]interface{}
	ta.call("GET", "/v1/health", nil, 200, &health)
	hostname, _ := os.Hostname()
	if health["version"] != "1.0.0" || health["api"] != float64(1) || health["bootId"] != "1234" || health["pid"] != float64(os.Getpid()) || health["hostname"] != hostname {
		t.Fatalf("health: %v", health)
	}
}

func TestUnknownRoutesAreNotFound(t *testing.T) {
	ta := startTestAgent(t, "", nil)
	for _, path := range []string{"/health", "/v1/nothing", "/v2/health", "/v1/processes/a/b/c"} {
		if code := ta.errorCode("GET", path, nil, 404); code != "not_found" {
			t.Errorf("%s: %s", path, code)
		}
	}
}

func TestReadBootID(t *testing.T) {
	boot, err := readBootID()
	if err != nil || boot == "" || strings.ContainsAny(boot, " )") {
		t.Fatalf("boot id %q: %v", boot, err)
	}
}

func TestListenReplacesStaleSocketOnly(t *testing.T) {
	dir, _ := os.MkdirTemp("", "agent")
	defer os.RemoveAll(dir)
	socket := filepath.Join(dir, "run", "agent.sock")
	first, err := listenUnix(socket)
	if err != nil {
		t.Fatal(err)
	}
	if info, _ := os.Stat(filepath.Dir(socket)); info.Mode().Perm() != 0o700 {
		t.Errorf("socket directory mode %v", info.Mode().Perm())
	}
	if _, err := listenUnix(socket); err == nil {
		t.Fatal("a second agent listened on a socket that answers")
	}
	// A socket left behind: the file stays, no one listens.
	first.(*net.UnixListener).SetUnlinkOnClose(false)
	first.Close()
	second, err := listenUnix(socket)
	if err != nil {
		t.Fatalf("stale socket not replaced: %v", err)
	}
	second.Close()
}
