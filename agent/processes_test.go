package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type outputAnswer struct {
	Stdout, Stderr []byte
	Offset         int64
	Dropped        int64
	Running        bool
	ExitCode       *int
	EndReason      *string
}

func (ta *testAgent) startProcess(id, command string) processInfo {
	ta.t.Helper()
	var info processInfo
	ta.call("POST", "/v1/processes", processRequest{ID: id, Command: command, StartedAt: 1000}, 201, &info)
	return info
}

func (ta *testAgent) output(id string, query string) outputAnswer {
	ta.t.Helper()
	var answer outputAnswer
	ta.call("GET", "/v1/processes/"+id+"/output?"+query, nil, 200, &answer)
	return answer
}

// readToEnd reads a process's output from offset 0 until it has ended and nothing follows.
func (ta *testAgent) readToEnd(id string) (stdout, stderr string, last outputAnswer) {
	ta.t.Helper()
	var offset int64
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		last = ta.output(id, fmt.Sprintf("offset=%d&waitMs=5000", offset))
		stdout += string(last.Stdout)
		stderr += string(last.Stderr)
		if !last.Running && len(last.Stdout)+len(last.Stderr) == 0 {
			return stdout, stderr, last
		}
		offset = last.Offset
	}
	ta.t.Fatalf("process %s did not end", id)
	return
}

func TestProcessStartListAndOutput(t *testing.T) {
	ta := startTestAgent(t, "", nil)
	info := ta.startProcess("proc_b", "echo one; sleep 0.05; echo two >&2; sleep 0.2; echo three; exit 6")
	if info.Status != "running" || info.Pid <= 0 || info.EndReason != nil || info.StartedAt != 1000 || info.Command == "" {
		t.Fatalf("started %+v", info)
	}
	ta.startProcess("proc_a", "true")

	var list struct{ Data []processInfo }
	ta.call("GET", "/v1/processes", nil, 200, &list)
	if len(list.Data) != 2 || list.Data[0].ID != "proc_a" || list.Data[1].ID != "proc_b" {
		t.Fatalf("list %+v", list)
	}

	stdout, stderr, last := ta.readToEnd("proc_b")
	if stdout != "one\nthree\n" || stderr != "two\n" || last.Offset != 14 || *last.ExitCode != 6 || *last.EndReason != "exited" {
		t.Fatalf("stdout %q stderr %q last %+v", stdout, stderr, last)
	}
	// Any offset reads on from there, in the order the bytes came.
	if middle := ta.output("proc_b", "offset=6&limit=4"); string(middle.Stderr) != "o\n" || string(middle.Stdout) != "th" || middle.Offset != 10 {
		t.Fatalf("from 6: %+v", middle)
	}
	var ended processInfo
	ta.call("GET", "/v1/processes/proc_b", nil, 200, &ended)
	if ended.Status != "exited" || *ended.ExitCode != 6 || *ended.EndReason != "exited" {
		t.Fatalf("ended %+v", ended)
	}
	ta.errorCode("GET", "/v1/processes/nope", nil, 404)
}

func TestProcessIDIsTakenOnce(t *testing.T) {
	ta := startTestAgent(t, "", nil)
	ta.startProcess("twice", "true")
	if code := ta.errorCode("POST", "/v1/processes", processRequest{ID: "twice", Command: "true"}, 409); code != "conflict" {
		t.Fatal(code)
	}
}

func TestProcessOutputWaitIsWokenByInput(t *testing.T) {
	ta := startTestAgent(t, "", nil)
	ta.startProcess("cat", "cat")
	answered := make(chan outputAnswer)
	go func() { answered <- ta.output("cat", "offset=0&waitMs=20000") }()
	time.Sleep(200 * time.Millisecond)
	sent := time.Now()
	ta.call("POST", "/v1/processes/cat/stdin", []byte("hello\n"), 204, nil)
	answer := <-answered
	if string(answer.Stdout) != "hello\n" || !answer.Running || answer.Offset != 6 {
		t.Fatalf("answer %+v", answer)
	}
	// Woken by the output, not ended by its 20 s wait (the margin is for a loaded host, not a speed).
	if waited := time.Since(sent); waited > 10*time.Second {
		t.Fatalf("the waiting read answered %v after the output", waited)
	}
	// Nothing follows: the wait ends at waitMs.
	started := time.Now()
	if answer := ta.output("cat", "offset=6&waitMs=100"); len(answer.Stdout) != 0 || !answer.Running || time.Since(started) < 100*time.Millisecond {
		t.Fatalf("answer %+v after %v", answer, time.Since(started))
	}
}

func TestProcessSignalReachesItsGroup(t *testing.T) {
	ta := startTestAgent(t, "", nil)
	ta.startProcess("trap", "trap 'echo terminated; exit 7' TERM; echo ready; while :; do sleep 0.05; done")
	ta.output("trap", "offset=0&waitMs=5000") // ready
	ta.call("POST", "/v1/processes/trap/signal", map[string]string{"signal": "TERM"}, 204, nil)
	stdout, _, last := ta.readToEnd("trap")
	if stdout != "ready\nterminated\n" || *last.ExitCode != 7 {
		t.Fatalf("stdout %q, last %+v", stdout, last)
	}
	ta.startProcess("killed", "sleep 30")
	ta.call("POST", "/v1/processes/killed/signal", map[string]string{"signal": "KILL"}, 204, nil)
	if _, _, last := ta.readToEnd("killed"); *last.ExitCode != 137 {
		t.Fatalf("killed: %+v", last)
	}
	ta.errorCode("POST", "/v1/processes/killed/signal", map[string]string{"signal": "TERM"}, 409)
	ta.errorCode("POST", "/v1/processes/killed/stdin", []byte("late"), 409)
	ta.errorCode("POST", "/v1/processes/killed/signal", map[string]string{"signal": "STOP"}, 400)
}

func TestProcessOutputFollow(t *testing.T) {
	ta := startTestAgent(t, "", nil)
	ta.startProcess("follow", "echo a; sleep 0.2; echo b >&2; exit 2")
	response := ta.request("GET", "/v1/processes/follow/output?offset=0&follow=1", nil)
	defer response.Body.Close()
	lines := readLines(t, response.Body)
	want := `[{"data":"YQo=","offset":2,"type":"stdout"},{"data":"Ygo=","offset":4,"type":"stderr"},{"endReason":"exited","exitCode":2,"type":"end"}]`
	if got, _ := json.Marshal(lines); string(got) != want {
		t.Fatalf("lines %s", got)
	}
}

func TestProcessCwdThatIsNotADirectory(t *testing.T) {
	ta := startTestAgent(t, "", nil)
	missing := filepath.Join(t.TempDir(), "missing")
	var info processInfo
	ta.call("POST", "/v1/processes", processRequest{ID: "nowhere", Command: "true", Cwd: &missing}, 201, &info)
	_, stderr, last := ta.readToEnd("nowhere")
	if !strings.Contains(stderr, missing) || *last.ExitCode != 2 {
		t.Fatalf("stderr %q, last %+v", stderr, last)
	}
}

func TestProcessesAfterTheAgentRestarts(t *testing.T) {
	records := t.TempDir()
	first := startTestAgent(t, records, func(c *config) { c.bootID = "boot1" })
	first.startProcess("done", "echo kept; exit 3")
	first.readToEnd("done")
	first.startProcess("orphaned", "sleep 30")
	// A record from before the machine's last start, never ended.
	stopped := filepath.Join(records, "procs", "stopped")
	os.MkdirAll(stopped, 0o755)
	os.WriteFile(filepath.Join(stopped, "boot"), []byte("boot0\n"), 0o644)
	os.WriteFile(filepath.Join(stopped, "command"), []byte("server"), 0o644)

	second := startTestAgent(t, records, func(c *config) { c.bootID = "boot1" })
	var list struct{ Data []processInfo }
	second.call("GET", "/v1/processes", nil, 200, &list)
	got := map[string]string{}
	for _, p := range list.Data {
		got[p.ID] = fmt.Sprintf("%s %v %s %d", p.Status, p.ExitCode != nil, *p.EndReason, p.StartedAt)
	}
	want := map[string]string{"done": "exited true exited 1000", "orphaned": "exited false lost 1000", "stopped": "exited false machine-stopped 0"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("after the restart: %v", got)
	}
	if answer := second.output("done", "offset=0&waitMs=1000"); string(answer.Stdout) != "kept\n" || answer.Running || *answer.ExitCode != 3 {
		t.Fatalf("output %+v", answer)
	}
	if answer := second.output("stopped", "offset=0&waitMs=1000"); answer.Running || len(answer.Stdout) != 0 || *answer.EndReason != "machine-stopped" {
		t.Fatalf("output %+v", answer)
	}
	second.errorCode("POST", "/v1/processes/orphaned/signal", map[string]string{"signal": "KILL"}, 409)
	second.errorCode("POST", "/v1/processes", processRequest{ID: "done", Command: "true"}, 409)
}

func TestProcessOutputKeepsOnlyTheLastSegments(t *testing.T) {
	ta := startTestAgent(t, "", func(c *config) { c.segmentSize, c.maxSegments = 64<<10, 4 })
	ta.startProcess("flood", "head -c 1000000 /dev/zero; echo end")
	_, _, last := ta.readToEnd("flood")
	if last.Offset != 1000004 {
		t.Fatalf("offset %d", last.Offset)
	}
	answer := ta.output("flood", "offset=0")
	kept := int64(len(answer.Stdout))
	if answer.Dropped == 0 || answer.Dropped+kept != 1000004 || kept > 4*64<<10 || !strings.HasSuffix(string(answer.Stdout), "\x00end\n") {
		t.Fatalf("dropped %d, kept %d", answer.Dropped, kept)
	}
	segments, _ := filepath.Glob(filepath.Join(ta.records, "procs", "flood", "output.*"))
	if len(segments) != 4 {
		t.Fatalf("%d segments", len(segments))
	}
	// Following from the start says what it skipped first.
	response := ta.request("GET", "/v1/processes/flood/output?offset=10&follow=1", nil)
	defer response.Body.Close()
	lines := readLines(t, response.Body)
	if lines[0]["type"] != "dropped" || lines[0]["bytes"] != float64(answer.Dropped-10) || lines[len(lines)-1]["type"] != "end" {
		t.Fatalf("first %v, last %v", lines[0], lines[len(lines)-1])
	}
}
