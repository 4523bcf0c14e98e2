package main

import (
	"bufio"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// A run executes a command once under its id. Its record directory is
// created with os.Mkdir before anything runs, under the agent's runs lock:
// whoever creates it runs the command, everyone else attaches to that
// execution or reads its record. The record's `exit` is written last, so a
// record with `exit` is complete, and one without it that no one runs ended
// with the agent or the machine (`unknown`).

const (
	// runOutputKept is how much of each stream a record keeps: the service
	// keeps 1 MiB and knows from the extra byte that there was more.
	runOutputKept = 1<<20 + 1
	// runRecordsKeptFor: the longest timeout is one hour; records live for two.
	runRecordsKeptFor = 2 * time.Hour
	// followerBacklog is how many reads a slow follower may fall behind before it misses some.
	followerBacklog = 256
)

// The three output files of a run's record, in the order of `sizes`.
var runOutputFiles = [3]string{"stdout", "stderr", "output"}

type runRequest struct {
	ID        string            `json:"id"`
	Command   string            `json:"command"`
	Cwd       *string           `json:"cwd"`
	Env       map[string]string `json:"env"`
	TimeoutMs int64             `json:"timeoutMs"` // 0: none
}

// run is a run this agent executes now.
type run struct {
	dir  string
	done chan struct{} // closed once `exit` is written

	mu        sync.Mutex
	files     [3]*os.File // stdout, stderr, output: their first runOutputKept bytes
	written   [3]int64    // every byte, for `sizes`
	followers map[chan outputChunk]bool
	ended     bool // no more output: followers' channels are closed
}

type outputLine struct {
	Type string `json:"type"` // stdout or stderr
	Data []byte `json:"data"`
}

func (a *agent) postRun(w http.ResponseWriter, r *http.Request, _ []string) error {
	var request runRequest
	if err := decodeJSON(w, r, &request); err != nil {
		return err
	}
	if err := checkID(request.ID); err != nil {
		return err
	}
	if request.Command == "" {
		return invalid("command is required")
	}
	if request.TimeoutMs < 0 {
		return invalid("timeoutMs must not be negative")
	}
	if err := checkEnv(request.Env); err != nil {
		return err
	}
	follow, err := flagParam(r, "follow")
	if err != nil {
		return err
	}

	running, err := a.startOrAttachRun(request)
	if err != nil {
		return err
	}
	stream := startNDJSON(w)
	if running != nil {
		if follow {
			if !running.follow(r, stream) {
				return nil
			}
		}
		select {
		case <-running.done:
		case <-r.Context().Done():
			return nil // the run goes on without this client
		}
	}
	if err := writeRunResult(stream.w, filepath.Join(a.runsDir(), request.ID)); err != nil {
		// The headers are sent: reset the stream rather than end it without its result.
		log.Printf("run %s: %v", request.ID, err)
		panic(http.ErrAbortHandler)
	}
	stream.flusher.Flush()
	return nil
}

func (a *agent) runsDir() string { return filepath.Join(a.recordsDir, "runs") }

// startOrAttachRun is the run this agent executes under the id (started now
// if the id is new), or nil when the record is to answer.
func (a *agent) startOrAttachRun(request runRequest) (*run, error) {
	a.runsMu.Lock()
	defer a.runsMu.Unlock()
	if running := a.runs[request.ID]; running != nil {
		return running, nil
	}
	if err := os.MkdirAll(a.runsDir(), 0o755); err != nil {
		return nil, fmt.Errorf("runs: %w", err)
	}
	dir := filepath.Join(a.runsDir(), request.ID)
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("run %s: %w", request.ID, err)
	}
	running, err := a.startRun(dir, request)
	if err != nil {
		os.RemoveAll(dir) // nothing ran: a retry may start it
		return nil, err
	}
	a.runs[request.ID] = running
	go a.removeOldRuns()
	return running, nil
}

// startRun creates the record's files and starts the command (or records why it could not start).
func (a *agent) startRun(dir string, request runRequest) (*run, error) {
	running := &run{dir: dir, done: make(chan struct{}), followers: map[chan outputChunk]bool{}}
	if err := os.WriteFile(filepath.Join(dir, "boot"), []byte(a.bootID+"\n"), 0o644); err != nil {
		return nil, fmt.Errorf("run record: %w", err)
	}
	for i, name := range runOutputFiles {
		file, err := os.OpenFile(filepath.Join(dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			running.closeFiles()
			return nil, fmt.Errorf("run record: %w", err)
		}
		running.files[i] = file
	}

	cwd, cwdErr := a.resolveCwd(request.Cwd)
	pipes, err := newOutputPipes()
	if err != nil {
		running.closeFiles()
		return nil, err
	}
	cmd := exec.Command("/bin/sh", "-c", request.Command)
	cmd.Dir, cmd.Env = cwd, commandEnv(request.Env)
	cmd.Stdout, cmd.Stderr = pipes.stdoutWriter, pipes.stderrWriter // stdin: /dev/null
	startErr := cwdErr
	if startErr == nil {
		startErr = startInSession(cmd)
	}
	if startErr != nil {
		pipes.closeAll()
		running.write(streamStderr, []byte("machine-agent: "+startErr.Error()+"\n"))
		go a.finishRun(running, strconv.Itoa(startFailureCode(cwdErr != nil)))
		return running, nil
	}
	pipes.closeWriters()
	go a.superviseRun(running, cmd, pipes, time.Duration(request.TimeoutMs)*time.Millisecond)
	return running, nil
}

// superviseRun waits for the command (killing its whole group at the timeout) and its output, then finishes the record.
func (a *agent) superviseRun(running *run, cmd *exec.Cmd, pipes *outputPipes, timeout time.Duration) {
	exited := make(chan struct{})
	drained := make(chan struct{})
	go func() {
		pipes.drain(exited, running.write)
		close(drained)
	}()

	var timedOut bool
	if timeout > 0 {
		timer := time.AfterFunc(timeout, func() { signalGroup(cmd.Process.Pid, syscall.SIGKILL) })
		cmd.Wait()
		timedOut = !timer.Stop()
	} else {
		cmd.Wait()
	}
	close(exited)
	<-drained

	exit := strconv.Itoa(exitCodeOf(cmd.ProcessState))
	if timedOut {
		exit = "timeout"
	}
	a.finishRun(running, exit)
}

// write keeps a read of the command's output in the record and passes it to followers.
func (running *run) write(stream byte, data []byte) {
	running.mu.Lock()
	defer running.mu.Unlock()
	for _, i := range []int{streamIndex(stream), 2} {
		if room := runOutputKept - running.written[i]; room > 0 {
			kept := data
			if int64(len(kept)) > room {
				kept = kept[:room]
			}
			if _, err := running.files[i].Write(kept); err != nil {
				log.Printf("run record %s: %v", running.dir, err)
			}
		}
		running.written[i] += int64(len(data))
	}
	if len(running.followers) > 0 {
		chunk := outputChunk{stream: stream, data: append([]byte(nil), data...)}
		for follower := range running.followers {
			select {
			case follower <- chunk:
			default: // the follower lags: it misses this read (the record keeps it)
			}
		}
	}
}

func streamIndex(stream byte) int {
	if stream == streamStderr {
		return 1
	}
	return 0
}

// follow streams the run's output lines until it ends; false when the client went away.
func (running *run) follow(r *http.Request, stream *ndjsonStream) bool {
	lines := running.addFollower()
	defer running.removeFollower(lines)
	for {
		select {
		case chunk, open := <-lines:
			if !open {
				return true
			}
			if stream.send(outputLine{Type: streamName(chunk.stream), Data: chunk.data}) != nil {
				return false
			}
		case <-r.Context().Done():
			return false
		}
	}
}

func (running *run) addFollower() chan outputChunk {
	running.mu.Lock()
	defer running.mu.Unlock()
	lines := make(chan outputChunk, followerBacklog)
	if running.ended {
		close(lines)
	} else {
		running.followers[lines] = true
	}
	return lines
}

func (running *run) removeFollower(lines chan outputChunk) {
	running.mu.Lock()
	defer running.mu.Unlock()
	delete(running.followers, lines)
}

func (running *run) closeFiles() {
	for _, file := range running.files {
		if file != nil {
			file.Close()
		}
	}
}

// finishRun writes `sizes` then `exit` (last, in one rename), and only then lets waiters read the record.
func (a *agent) finishRun(running *run, exit string) {
	running.mu.Lock()
	running.ended = true
	for follower := range running.followers {
		close(follower)
	}
	running.followers = nil
	running.closeFiles()
	sizes := fmt.Sprintf("%d %d %d\n", running.written[0], running.written[1], running.written[2])
	running.mu.Unlock()

	if err := os.WriteFile(filepath.Join(running.dir, "sizes"), []byte(sizes), 0o644); err != nil {
		log.Printf("run record %s: %v", running.dir, err)
	}
	if err := writeFileAtomically(filepath.Join(running.dir, "exit"), []byte(exit+"\n")); err != nil {
		log.Printf("run record %s: %v", running.dir, err)
	}
	a.runsMu.Lock()
	delete(a.runs, filepath.Base(running.dir))
	a.runsMu.Unlock()
	close(running.done)
	captureScreen(running.dir)
}

// writeFileAtomically writes a file whole under a temporary name, then
// renames it: a reader sees it complete or not at all.
func writeFileAtomically(path string, data []byte) error {
	temporary := path + ".new"
	if err := os.WriteFile(temporary, data, 0o644); err != nil {
		return err
	}
	return os.Rename(temporary, path)
}

// displaySocket is the X server's socket of the display a run's screen is taken from (:1).
var displaySocket = "/tmp/.X11-unix/X1"

// captureScreen saves the display as the run left it, where the machine
// has one; nobody waits for it.
func captureScreen(dir string) {
	if _, err := os.Stat(displaySocket); err != nil {
		return
	}
	scrot, err := exec.LookPath("scrot")
	if err != nil {
		return
	}
	// scrot writes its file as it goes: under another name (its format is
	// read from the extension), renamed when whole, a reader never sees
	// half a picture or an empty file.
	partial := filepath.Join(dir, "screen.partial.png")
	cmd := exec.Command(scrot, "-o", "-z", partial)
	cmd.Env = append(commandEnv(nil), "DISPLAY=:1")
	if cmd.Start() != nil {
		return
	}
	go func() {
		if cmd.Wait() != nil {
			os.Remove(partial)
			return
		}
		if info, err := os.Stat(partial); err != nil || info.Size() == 0 {
			os.Remove(partial)
			return
		}
		os.Rename(partial, filepath.Join(dir, "screen.png"))
	}()
}

// writeRunResult writes the result line of a record: its exit and output,
// or `unknown` when it has no exit (nothing in this agent runs it):
//
//	{"type":"result","status":"exited"|"timeout"|"unknown","exitCode":0|null,
//	 "stdout":"<base64>","stderr":"<base64>","output":"<base64>",
//	 "stdoutBytes":0,"stderrBytes":0,"outputBytes":0}
//
// The output goes from the record's files to base64 as it is read: an
// answer holds a buffer, not 3 MiB of output and its encoding.
func writeRunResult(w io.Writer, dir string) error {
	status, exitCode, err := readRunExit(dir)
	if err != nil {
		return err
	}
	var sizes [3]int64
	if status != "unknown" {
		sizes = readRunSizes(dir)
	}
	line := bufio.NewWriterSize(w, 32<<10)
	fmt.Fprintf(line, `{"type":"result","status":%q,"exitCode":%s`, status, exitCode)
	for _, name := range runOutputFiles {
		fmt.Fprintf(line, `,%q:"`, name)
		if status != "unknown" {
			if err := copyBase64(line, filepath.Join(dir, name), runOutputKept); err != nil {
				return err
			}
		}
		line.WriteString(`"`)
	}
	fmt.Fprintf(line, `,"stdoutBytes":%d,"stderrBytes":%d,"outputBytes":%d}`+"\n", sizes[0], sizes[1], sizes[2])
	return line.Flush()
}

// readRunExit is the record's status and exit code (as JSON: a number or null).
func readRunExit(dir string) (status, exitCode string, err error) {
	exit, err := os.ReadFile(filepath.Join(dir, "exit"))
	if errors.Is(err, fs.ErrNotExist) {
		return "unknown", "null", nil
	}
	if err != nil {
		return "", "", err
	}
	code := strings.TrimSpace(string(exit))
	if code == "timeout" {
		return "timeout", "null", nil
	}
	if _, err := strconv.Atoi(code); err != nil {
		return "", "", fmt.Errorf("%s/exit: %q is no exit code", dir, code)
	}
	return "exited", code, nil
}

// readRunSizes is what `sizes` counts; the files' sizes stand in where it is missing.
func readRunSizes(dir string) [3]int64 {
	var sizes [3]int64
	for i, name := range runOutputFiles {
		if info, err := os.Stat(filepath.Join(dir, name)); err == nil {
			sizes[i] = info.Size()
		}
	}
	if text, err := os.ReadFile(filepath.Join(dir, "sizes")); err == nil {
		fmt.Sscan(string(text), &sizes[0], &sizes[1], &sizes[2])
	}
	return sizes
}

// copyBase64 writes a file's first bytes, at most limit, in base64; a missing file is empty.
func copyBase64(w io.Writer, path string, limit int64) error {
	file, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	defer file.Close()
	encoder := base64.NewEncoder(base64.StdEncoding, w)
	if _, err := io.Copy(encoder, io.LimitReader(file, limit)); err != nil {
		return err
	}
	return encoder.Close()
}

// removeOldRuns removes records older than runRecordsKeptFor, one sweep at a time.
func (a *agent) removeOldRuns() {
	if !a.cleaningRuns.TryLock() {
		return
	}
	defer a.cleaningRuns.Unlock()
	entries, err := os.ReadDir(a.runsDir())
	if err != nil {
		return
	}
	before := time.Now().Add(-runRecordsKeptFor)
	for _, entry := range entries {
		info, err := entry.Info()
		if err != nil || !info.ModTime().Before(before) {
			continue
		}
		a.runsMu.Lock()
		_, running := a.runs[entry.Name()]
		a.runsMu.Unlock()
		if !running {
			os.RemoveAll(filepath.Join(a.runsDir(), entry.Name()))
		}
	}
}
