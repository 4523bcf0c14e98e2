package main

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// postRun posts a run and returns its stream's lines and its result (the last line).
func (ta *testAgent) postRun(request runRequest, follow bool) ([]map[string]interface{}, runResult) {
	ta.t.Helper()
	path := "/v1/runs"
	if follow {
		path += "?follow=1"
	}
	response := ta.request("POST", path, request)
	defer response.Body.Close()
	if response.StatusCode != 200 {
		ta.t.Fatalf("POST %s: %d", path, response.StatusCode)
	}
	return splitResult(ta.t, readLines(ta.t, response.Body))
}

func splitResult(t *testing.T, lines []map[string]interface{}) ([]map[string]interface{}, runResult) {
	t.Helper()
	if len(lines) == 0 || lines[len(lines)-1]["type"] != "result" {
		t.Fatalf("the stream does not end with a result: %v", lines)
	}
	encoded, _ := json.Marshal(lines[len(lines)-1])
	var result runResult
	json.Unmarshal(encoded, &result)
	return lines[:len(lines)-1], result
}

// runResult is a run's result line, decoded.
type runResult struct {
	Type        string `json:"type"`
	Status      string `json:"status"`
	ExitCode    *int   `json:"exitCode"`
	Stdout      []byte `json:"stdout"`
	Stderr      []byte `json:"stderr"`
	Output      []byte `json:"output"`
	StdoutBytes int64  `json:"stdoutBytes"`
	StderrBytes int64  `json:"stderrBytes"`
	OutputBytes int64  `json:"outputBytes"`
}

func exitCode(result runResult) int {
	if result.ExitCode == nil {
		return -1
	}
	return *result.ExitCode
}

func TestRunResult(t *testing.T) {
	ta := startTestAgent(t, "", nil)
	cwd := t.TempDir()
	missing := filepath.Join(cwd, "missing")
	cases := []struct {
		name                   string
		command                string
		cwd                    *string
		env                    map[string]string
		code                   int
		stdout, stderr, output string
	}{
		{name: "exit code", command: "exit 3", code: 3},
		{name: "stdout and stderr apart and together", command: "echo out; sleep 0.05; echo err >&2", stdout: "out\n", stderr: "err\n", output: "out\nerr\n"},
		{name: "cwd", command: "pwd", cwd: &cwd, stdout: cwd + "\n", output: cwd + "\n"},
		{name: "default cwd", command: "pwd", stdout: ta.agent.defaultCwd + "\n", output: ta.agent.defaultCwd + "\n"},
		{name: "env", command: `echo "$GREETING $HOME"`, env: map[string]string{"GREETING": "hello", "HOME": "/elsewhere"}, stdout: "hello /elsewhere\n", output: "hello /elsewhere\n"},
		{name: "killed by a signal", command: "kill -9 $$", code: 137},
		{name: "stdin is empty", command: "cat", code: 0},
		{name: "cwd that is not a directory", command: "echo ran", cwd: &missing, code: 2},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ta.t = t
			_, result := ta.postRun(runRequest{ID: "run_" + strconv.Itoa(i), Command: c.command, Cwd: c.cwd, Env: c.env, TimeoutMs: 10000}, false)
			if result.Status != "exited" || exitCode(result) != c.code {
				t.Fatalf("status %s, exit %d, want exited %d (stderr %q)", result.Status, exitCode(result), c.code, result.Stderr)
			}
			if c.cwd == &missing {
				if !strings.Contains(string(result.Stderr), missing) || len(result.Stdout) != 0 {
					t.Fatalf("stderr %q, stdout %q", result.Stderr, result.Stdout)
				}
				return
			}
			if string(result.Stdout) != c.stdout || string(result.Stderr) != c.stderr || string(result.Output) != c.output {
				t.Fatalf("stdout %q, stderr %q, output %q", result.Stdout, result.Stderr, result.Output)
			}
			if result.StdoutBytes != int64(len(c.stdout)) || result.StderrBytes != int64(len(c.stderr)) || result.OutputBytes != int64(len(c.output)) {
				t.Fatalf("sizes %d %d %d", result.StdoutBytes, result.StderrBytes, result.OutputBytes)
			}
		})
	}
}

func TestRunRecord(t *testing.T) {
	ta := startTestAgent(t, "", func(c *config) { c.bootID = "42" })
	ta.postRun(runRequest{ID: "r", Command: "echo out; echo err >&2; exit 4"}, false)
	dir := filepath.Join(ta.records, "runs", "r")
	for name, want := range map[string]string{"stdout": "out\n", "stderr": "err\n", "sizes": "4 4 8\n", "boot": "42\n", "exit": "4\n"} {
		if data, _ := os.ReadFile(filepath.Join(dir, name)); string(data) != want {
			t.Errorf("%s: %q, want %q", name, data, want)
		}
	}
}

func TestRunFollowStreamsOutputAsItComes(t *testing.T) {
	ta := startTestAgent(t, "", nil)
	// The command prints its second line only once the test has read the first: a stream that held output back
	// until the end would leave the run waiting for the gate until its timeout.
	gate := filepath.Join(t.TempDir(), "gate")
	command := "echo first; while [ ! -e " + gate + " ]; do sleep 0.02; done; echo second >&2"
	response := ta.request("POST", "/v1/runs?follow=1", runRequest{ID: "f", Command: command, TimeoutMs: 20000})
	defer response.Body.Close()
	reader := bufio.NewReader(response.Body)
	first, err := reader.ReadBytes('\n')
	if err != nil || !strings.Contains(string(first), `"type":"stdout"`) || !strings.Contains(string(first), `"data":"Zmlyc3QK"`) {
		t.Fatalf("first line %q: %v", first, err)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	lines, result := splitResult(t, readLines(t, reader))
	if len(lines) != 1 || lines[0]["type"] != "stderr" || lines[0]["data"] != "c2Vjb25kCg==" || result.Status != "exited" || string(result.Output) != "first\nsecond\n" {
		t.Fatalf("lines %v, result %+v", lines, result)
	}
}

func TestRunIsExecutedOnceUnderItsID(t *testing.T) {
	ta := startTestAgent(t, "", nil)
	counter := filepath.Join(t.TempDir(), "counter")
	request := runRequest{ID: "once", Command: "echo x >> " + counter + "; sleep 0.2; echo done", TimeoutMs: 10000}
	var wg sync.WaitGroup
	results := make([]runResult, 4)
	for i := range results {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			_, results[i] = ta.postRun(request, i%2 == 0)
		}(i)
	}
	wg.Wait()
	for _, result := range results {
		if result.Status != "exited" || exitCode(result) != 0 || string(result.Stdout) != "done\n" {
			t.Fatalf("result %+v", result)
		}
	}
	// Later, the record answers.
	_, later := ta.postRun(request, false)
	if data, _ := os.ReadFile(counter); string(data) != "x\n" || string(later.Stdout) != "done\n" {
		t.Fatalf("executed %q; later %+v", data, later)
	}
}

func TestRunReattachesAfterTheConnectionDies(t *testing.T) {
	ta := startTestAgent(t, "", nil)
	counter := filepath.Join(t.TempDir(), "counter")
	request := runRequest{ID: "reattach", Command: "echo start; sleep 0.5; echo x >> " + counter + "; echo end", TimeoutMs: 10000}

	var conn net.Conn
	dying := newTestClient(ta.socket, func(c net.Conn) { conn = c })
	response := doRequest(t, dying, "POST", "/v1/runs?follow=1", request)
	if line, err := bufio.NewReader(response.Body).ReadBytes('\n'); err != nil || !strings.Contains(string(line), "stdout") {
		t.Fatalf("first line %q: %v", line, err)
	}
	conn.Close() // the service's exec dies mid-run

	_, result := ta.postRun(request, false)
	if result.Status != "exited" || string(result.Stdout) != "start\nend\n" {
		t.Fatalf("result %+v", result)
	}
	if data, _ := os.ReadFile(counter); string(data) != "x\n" {
		t.Fatalf("executed %q", data)
	}
}

func TestRunTimeoutKillsItsWholeGroup(t *testing.T) {
	ta := startTestAgent(t, "", nil)
	pidFile := filepath.Join(t.TempDir(), "pid")
	started := time.Now()
	_, result := ta.postRun(runRequest{ID: "slow", Command: "sleep 30 & echo $! > " + pidFile + "; echo waiting; sleep 30", TimeoutMs: 300}, false)
	if result.Status != "timeout" || result.ExitCode != nil || string(result.Stdout) != "waiting\n" || time.Since(started) > 5*time.Second {
		t.Fatalf("result %+v after %v", result, time.Since(started))
	}
	if exit, _ := os.ReadFile(filepath.Join(ta.records, "runs", "slow", "exit")); string(exit) != "timeout\n" {
		t.Fatalf("exit %q", exit)
	}
	data, _ := os.ReadFile(pidFile)
	background := strings.TrimSpace(string(data))
	deadline := time.Now().Add(2 * time.Second)
	for processAlive(background) {
		if time.Now().After(deadline) {
			t.Fatalf("the background sleep %s outlived the timeout", background)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// processAlive: the process exists and is no zombie.
func processAlive(pid string) bool {
	stat, err := os.ReadFile("/proc/" + pid + "/stat")
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

func TestRunGivesBackgroundOutputOneSecond(t *testing.T) {
	ta := startTestAgent(t, "", nil)
	started := time.Now()
	// The background sleep holds the run's stdout open long after the shell exits.
	_, result := ta.postRun(runRequest{ID: "bg", Command: "sleep 10 & echo hi", TimeoutMs: 20000}, false)
	if result.Status != "exited" || string(result.Stdout) != "hi\n" || time.Since(started) > 3*time.Second {
		t.Fatalf("result %+v after %v", result, time.Since(started))
	}
}

func TestRunWithoutExitThatNoOneRunsIsUnknown(t *testing.T) {
	ta := startTestAgent(t, "", nil)
	dir := filepath.Join(ta.records, "runs", "orphan")
	os.MkdirAll(dir, 0o755)
	os.WriteFile(filepath.Join(dir, "boot"), []byte("1\n"), 0o644)
	marker := filepath.Join(t.TempDir(), "ran")
	_, result := ta.postRun(runRequest{ID: "orphan", Command: "touch " + marker}, true)
	if result.Status != "unknown" || result.ExitCode != nil || len(result.Stdout) != 0 || result.OutputBytes != 0 {
		t.Fatalf("result %+v", result)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the command ran")
	}
}

func TestRunAnswersFromItsRecordAfterARestart(t *testing.T) {
	records := t.TempDir()
	first := startTestAgent(t, records, nil)
	first.postRun(runRequest{ID: "kept", Command: "echo kept; exit 5"}, false)
	second := startTestAgent(t, records, nil)
	_, result := second.postRun(runRequest{ID: "kept", Command: "echo again"}, true)
	if result.Status != "exited" || exitCode(result) != 5 || string(result.Stdout) != "kept\n" {
		t.Fatalf("result %+v", result)
	}
}

func TestRunKeepsTheFirstBytesAndCountsAll(t *testing.T) {
	ta := startTestAgent(t, "", nil)
	_, result := ta.postRun(runRequest{ID: "big", Command: "head -c 3000000 /dev/zero; echo tail >&2", TimeoutMs: 20000}, false)
	if len(result.Stdout) != runOutputKept || len(result.Output) != runOutputKept || string(result.Stderr) != "tail\n" {
		t.Fatalf("kept %d %d %q", len(result.Stdout), len(result.Output), result.Stderr)
	}
	if result.StdoutBytes != 3000000 || result.StderrBytes != 5 || result.OutputBytes != 3000005 {
		t.Fatalf("sizes %d %d %d", result.StdoutBytes, result.StderrBytes, result.OutputBytes)
	}
	if info, _ := os.Stat(filepath.Join(ta.records, "runs", "big", "stdout")); info.Size() != runOutputKept {
		t.Fatalf("stdout file %d bytes", info.Size())
	}
}

func TestRunRejectsBadRequests(t *testing.T) {
	ta := startTestAgent(t, "", nil)
	for _, body := range []interface{}{
		[]byte("not json"),
		runRequest{ID: "", Command: "true"},
		runRequest{ID: "../escape", Command: "true"},
		runRequest{ID: "ok", Command: ""},
		runRequest{ID: "ok", Command: "true", TimeoutMs: -1},
		runRequest{ID: "ok", Command: "true", Env: map[string]string{"A=B": "c"}},
	} {
		if code := ta.errorCode("POST", "/v1/runs", body, 400); code != "invalid_request" {
			t.Errorf("%v: %s", body, code)
		}
	}
}

func TestOldRunRecordsAreRemovedAsRunsStart(t *testing.T) {
	ta := startTestAgent(t, "", nil)
	old := filepath.Join(ta.records, "runs", "old")
	recent := filepath.Join(ta.records, "runs", "recent")
	os.MkdirAll(old, 0o755)
	os.MkdirAll(recent, 0o755)
	threeHoursAgo := time.Now().Add(-3 * time.Hour)
	os.Chtimes(old, threeHoursAgo, threeHoursAgo)
	ta.postRun(runRequest{ID: "new", Command: "true"}, false)
	deadline := time.Now().Add(2 * time.Second)
	for {
		_, oldErr := os.Stat(old)
		if os.IsNotExist(oldErr) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the old record stayed")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, err := os.Stat(recent); err != nil {
		t.Fatal("a recent record was removed")
	}
}

// A run's screen is written by scrot as it goes; a reader of the record must
// see the whole picture or none.
func TestRunScreenAppearsWhole(t *testing.T) {
	bin := t.TempDir()
	display := filepath.Join(t.TempDir(), "X1")
	os.WriteFile(display, nil, 0o644)
	// A scrot that writes half its picture, waits, then the rest; the picture is its last argument.
	fake := "#!/bin/sh\nfor f; do :; done\nprintf '\\211PNG' > \"$f\"; sleep 0.3; printf 'rest' >> \"$f\"\n"
	if err := os.WriteFile(filepath.Join(bin, "scrot"), []byte(fake), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", bin+":"+os.Getenv("PATH"))
	saved := displaySocket
	displaySocket = display
	defer func() { displaySocket = saved }()

	dir := t.TempDir()
	captureScreen(dir)
	screen := filepath.Join(dir, "screen.png")
	deadline := time.Now().Add(5 * time.Second)
	for {
		if data, err := os.ReadFile(screen); err == nil {
			if string(data) != "\x89PNGrest" {
				t.Fatalf("a reader saw %q", data)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no screen.png")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := os.Stat(filepath.Join(dir, "screen.partial.png")); !os.IsNotExist(err) {
		t.Fatalf("the partial picture is left: %v", err)
	}
}
