package main

import (
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// openTestTerminal opens a terminal and returns its id, its input and a reader of its output.
func openTestTerminal(t *testing.T, ta *testAgent, query string) (string, *io.PipeWriter, *http.Response) {
	t.Helper()
	input, inputWriter := io.Pipe()
	request, _ := http.NewRequest("POST", "http://agent/v1/terminals?"+query, input)
	response, err := ta.client.Do(request)
	if err != nil {
		t.Fatal(err)
	}
	if response.StatusCode != 200 || !strings.HasPrefix(response.Header.Get("X-Terminal-Id"), "term_") {
		t.Fatalf("status %d, id %q", response.StatusCode, response.Header.Get("X-Terminal-Id"))
	}
	t.Cleanup(func() { inputWriter.Close(); response.Body.Close() })
	return response.Header.Get("X-Terminal-Id"), inputWriter, response
}

// readUntil reads the output until it holds want, failing after a while.
func readUntil(t *testing.T, output io.Reader, want string) string {
	t.Helper()
	seen := make(chan string, 1)
	go func() {
		var all []byte
		buffer := make([]byte, 4096)
		for {
			n, err := output.Read(buffer)
			all = append(all, buffer[:n]...)
			if strings.Contains(string(all), want) || err != nil {
				seen <- string(all)
				return
			}
		}
	}()
	select {
	case all := <-seen:
		if !strings.Contains(all, want) {
			t.Fatalf("output %q has no %q", all, want)
		}
		return all
	case <-time.After(5 * time.Second):
		t.Fatalf("no %q in the output", want)
		return ""
	}
}

func TestTerminalEchoesAndResizes(t *testing.T) {
	ta := startTestAgent(t, "", nil)
	id, input, response := openTestTerminal(t, ta, "cols=100&rows=30&command=/bin/sh")
	io.WriteString(input, "echo ab''cd; stty size\n")
	readUntil(t, response.Body, "abcd\r\n30 100\r\n") // the PTY echoes the line, then the shell runs it

	ta.call("POST", "/v1/terminals/"+id+"/resize", map[string]int{"cols": 120, "rows": 40}, 204, nil)
	io.WriteString(input, "stty size\n")
	readUntil(t, response.Body, "40 120")

	ta.errorCode("POST", "/v1/terminals/term_nope/resize", map[string]int{"cols": 1, "rows": 1}, 404)
	ta.errorCode("POST", "/v1/terminals/"+id+"/resize", map[string]int{"cols": 0, "rows": 1}, 400)
}

func TestTerminalEndsWhenItsShellExits(t *testing.T) {
	ta := startTestAgent(t, "", nil)
	_, input, response := openTestTerminal(t, ta, "command=/bin/sh")
	io.WriteString(input, "exit\n")
	ended := make(chan error)
	go func() {
		_, err := io.ReadAll(response.Body)
		ended <- err
	}()
	select {
	case <-ended:
	case <-time.After(5 * time.Second):
		t.Fatal("the response went on after the shell exited")
	}
}

func TestTerminalEndsWhenItsInputCloses(t *testing.T) {
	ta := startTestAgent(t, "", nil)
	id, input, response := openTestTerminal(t, ta, "command="+q("sleep 30"))
	input.Close()
	done := make(chan struct{})
	go func() { io.ReadAll(response.Body); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the terminal went on after its input closed")
	}
	time.Sleep(50 * time.Millisecond)
	ta.errorCode("POST", "/v1/terminals/"+id+"/resize", map[string]int{"cols": 1, "rows": 1}, 404)
}

func TestClosingATerminalHangsUpOnItsSessionButNotOnDetachedProcesses(t *testing.T) {
	ta := startTestAgent(t, "", nil)
	dir := t.TempDir()
	_, input, response := openTestTerminal(t, ta, "command=/bin/sh")
	// A background job, a nohup one and a setsid one; each writes its pid where the test finds it.
	io.WriteString(input, "set -m; sleep 600 & echo $! > "+dir+"/job; nohup sleep 601 >/dev/null 2>&1 & echo $! > "+dir+"/nohup; setsid sh -c 'echo $$ > "+dir+"/setsid; exec sleep 602' & echo started\n")
	readUntil(t, response.Body, "started\r\n")
	pids := map[string]int{}
	for _, name := range []string{"job", "nohup", "setsid"} {
		deadline := time.Now().Add(5 * time.Second)
		for {
			text, _ := os.ReadFile(dir + "/" + name)
			if pid, err := strconv.Atoi(strings.TrimSpace(string(text))); err == nil {
				pids[name] = pid
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("no pid for %s", name)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	t.Cleanup(func() {
		for _, pid := range pids {
			syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	input.Close()
	io.ReadAll(response.Body)
	alive := func(pid int) bool {
		stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		// A zombie has ended: its parent has not reaped it yet.
		return err == nil && !strings.Contains(string(stat), ") Z ")
	}
	deadline := time.Now().Add(5 * time.Second)
	for alive(pids["job"]) {
		if time.Now().After(deadline) {
			t.Fatal("the background job outlived its terminal")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if !alive(pids["nohup"]) || !alive(pids["setsid"]) {
		t.Fatalf("a detached process ended with the terminal (nohup alive %v, setsid alive %v)", alive(pids["nohup"]), alive(pids["setsid"]))
	}
}
