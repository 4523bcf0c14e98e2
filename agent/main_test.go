package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/net/http2"
)

// echoSocket listens on a Unix socket at path and echoes what each connection sends.
func echoSocket(t *testing.T, path string) net.Listener {
	t.Helper()
	listener, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		for {
			conn, err := listener.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(conn, conn); conn.Close() }()
		}
	}()
	return listener
}

func TestAttachPipesBytesBothWays(t *testing.T) {
	dir, _ := os.MkdirTemp("", "agent")
	defer os.RemoveAll(dir)
	socket := filepath.Join(dir, "agent.sock")
	// The agent listens a moment after attach starts trying, as in a machine just started.
	go func() {
		time.Sleep(100 * time.Millisecond)
		listener := echoSocket(t, socket)
		t.Cleanup(func() { listener.Close() })
	}()

	stdin, stdinWriter := io.Pipe()
	stdoutReader, stdout := io.Pipe()
	exited := make(chan int)
	go func() { exited <- attachCommand([]string{"--socket", socket, "--wait-ms", "5000"}, stdin, stdout) }()

	echoed := bufio.NewReader(stdoutReader)
	payload := append(bytes.Repeat([]byte{0, 1, 2, 255}, 10000), '\n')
	go stdinWriter.Write(payload)
	line, err := echoed.ReadBytes('\n')
	if err != nil || !bytes.Equal(line, payload) {
		t.Fatalf("echoed %d bytes: %v", len(line), err)
	}
	stdinWriter.Close() // the service's exec ends
	select {
	case code := <-exited:
		if code != 0 {
			t.Fatalf("exit %d", code)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("attach did not end with its stdin")
	}
}

func TestAttachWithoutAnAgent(t *testing.T) {
	dir := t.TempDir()
	started := time.Now()
	code := attachCommand([]string{"--socket", filepath.Join(dir, "none.sock"), "--wait-ms", "200"}, bytes.NewReader(nil), io.Discard)
	if code != 3 || time.Since(started) < 200*time.Millisecond {
		t.Fatalf("exit %d after %v", code, time.Since(started))
	}
}

func TestAttachEndsWhenTheAgentCloses(t *testing.T) {
	dir, _ := os.MkdirTemp("", "agent")
	defer os.RemoveAll(dir)
	socket := filepath.Join(dir, "agent.sock")
	listener, _ := net.Listen("unix", socket)
	defer listener.Close()
	go func() {
		conn, err := listener.Accept()
		if err == nil {
			conn.Write([]byte("bye"))
			conn.Close()
		}
	}()
	stdin, _ := io.Pipe() // never ends
	var stdout bytes.Buffer
	if code := attachCommand([]string{"--socket", socket}, stdin, &stdout); code != 0 || stdout.String() != "bye" {
		t.Fatalf("exit %d, stdout %q", code, stdout.String())
	}
}

// pipeConn is a child process's stdout and stdin as a connection, as the
// service sees `agent attach` through its engine exec.
type pipeConn struct {
	io.Reader
	io.WriteCloser
}

func (pipeConn) LocalAddr() net.Addr              { return &net.UnixAddr{} }
func (pipeConn) RemoteAddr() net.Addr             { return &net.UnixAddr{} }
func (pipeConn) SetDeadline(time.Time) error      { return nil }
func (pipeConn) SetReadDeadline(time.Time) error  { return nil }
func (pipeConn) SetWriteDeadline(time.Time) error { return nil }

func TestTheBinaryCarriesHTTP2ThroughAttach(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	binary := filepath.Join(t.TempDir(), "machine-agent")
	if output, err := exec.Command("go", "build", "-o", binary, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, output)
	}
	if version, _ := exec.Command(binary, "version").Output(); string(version) != "1.0.0\n" {
		t.Fatalf("version %q", version)
	}
	ta := startTestAgent(t, "", nil)
	attach := exec.Command(binary, "attach", "--socket", ta.socket)
	stdin, _ := attach.StdinPipe()
	stdout, _ := attach.StdoutPipe()
	if err := attach.Start(); err != nil {
		t.Fatal(err)
	}
	client := &http.Client{Transport: &http2.Transport{
		AllowHTTP: true,
		DialTLS: func(string, string, *tls.Config) (net.Conn, error) {
			return pipeConn{stdout, stdin}, nil
		},
	}}
	ta.client = client
	var health map[string]interface{}
	ta.call("GET", "/v1/health", nil, 200, &health)
	_, result := ta.postRun(runRequest{ID: "through-attach", Command: "echo through"}, true)
	if health["version"] != "1.0.0" || string(result.Stdout) != "through\n" {
		t.Fatalf("health %v, result %+v", health, result)
	}
	stdin.Close() // the exec ends: attach exits 0
	if err := attach.Wait(); err != nil {
		t.Fatalf("attach: %v", err)
	}
}

// Regression: the agent ignored SIGHUP, and every program it started inherited that, so a closed terminal
// hung up on none of its processes.
func TestProgramsOfTheAgentGetHangupsAndInterrupts(t *testing.T) {
	signal.Ignore(syscall.SIGHUP, syscall.SIGINT) // as the machine's init starts the agent
	// Left caught afterwards: Reset would put back the ignoring, and the terminals' tests need hangups to reach their programs.
	outliveHangups()
	out, err := exec.Command("grep", "SigIgn", "/proc/self/status").Output()
	if err != nil {
		t.Fatal(err)
	}
	mask, err := strconv.ParseUint(strings.TrimSpace(strings.TrimPrefix(string(out), "SigIgn:")), 16, 64)
	if err != nil {
		t.Fatal(err)
	}
	if hup, intr := mask&(1<<(syscall.SIGHUP-1)), mask&(1<<(syscall.SIGINT-1)); hup != 0 || intr != 0 {
		t.Fatalf("a program of the agent ignores signals %#x", mask)
	}
}
