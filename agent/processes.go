package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Background processes outlive the request that started them and the
// service's connection, not the agent: the agent holds their stdin and
// reads their output. Each is recorded under procs/<id>/ (command,
// startedAt, boot, pid, exit when it ends, and its output log), so an agent
// started later lists it with why it ended and still serves its output.

const (
	outputReadDefault = 1 << 20
	outputReadMax     = 4 << 20
	outputWaitMax     = 30 * time.Second
)

type processRequest struct {
	ID        string            `json:"id"`
	Command   string            `json:"command"`
	Cwd       *string           `json:"cwd"`
	Env       map[string]string `json:"env"`
	StartedAt int64             `json:"startedAt"` // 0: now
}

type processInfo struct {
	ID        string  `json:"id"`
	Command   string  `json:"command"`
	Pid       int     `json:"pid"`
	Status    string  `json:"status"` // running or exited
	ExitCode  *int    `json:"exitCode"`
	EndReason *string `json:"endReason"` // null while it runs, else exited, machine-stopped or lost
	StartedAt int64   `json:"startedAt"`
}

type process struct {
	id, command string
	pid         int
	startedAt   int64
	dir         string
	stdin       *os.File   // the pipe's end the agent holds open; nil for one it does not run
	stdinMu     sync.Mutex // one request's input at a time, kept whole

	mu        sync.Mutex
	running   bool       // this agent runs it and has not reaped it: input and signals may reach it
	output    *outputLog // opened on first use for one an earlier agent ran
	exitCode  *int
	endReason string // "" while it runs
}

func (a *agent) procsDir() string { return filepath.Join(a.recordsDir, "procs") }

func (a *agent) postProcess(w http.ResponseWriter, r *http.Request, _ []string) error {
	var request processRequest
	if err := decodeJSON(w, r, &request); err != nil {
		return err
	}
	if err := checkID(request.ID); err != nil {
		return err
	}
	if request.Command == "" {
		return invalid("command is required")
	}
	if err := checkEnv(request.Env); err != nil {
		return err
	}
	if request.StartedAt == 0 {
		request.StartedAt = nowMs()
	}
	started, err := a.startProcess(request)
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusCreated, started.info())
}

func (a *agent) startProcess(request processRequest) (*process, error) {
	a.procsMu.Lock()
	defer a.procsMu.Unlock()
	if a.procs[request.ID] != nil {
		return nil, conflict("the process %s exists already", request.ID)
	}
	if err := os.MkdirAll(a.procsDir(), 0o755); err != nil {
		return nil, fmt.Errorf("processes: %w", err)
	}
	dir := filepath.Join(a.procsDir(), request.ID)
	if err := os.Mkdir(dir, 0o755); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, conflict("the process %s exists already", request.ID)
		}
		return nil, fmt.Errorf("process %s: %w", request.ID, err)
	}
	started := &process{id: request.ID, command: request.Command, startedAt: request.StartedAt, dir: dir,
		output: newOutputLog(dir, a.segmentSize, a.maxSegments)}
	if err := started.execute(a, request); err != nil {
		os.RemoveAll(dir) // nothing runs: the id may be used again
		return nil, err
	}
	a.procs[request.ID] = started
	return started, nil
}

// execute records the process and starts it (or records why it could not start).
func (p *process) execute(a *agent, request processRequest) error {
	for name, value := range map[string]string{
		"command":   request.Command,
		"startedAt": strconv.FormatInt(request.StartedAt, 10) + "\n",
		"boot":      a.bootID + "\n",
	} {
		if err := os.WriteFile(filepath.Join(p.dir, name), []byte(value), 0o644); err != nil {
			return fmt.Errorf("process record: %w", err)
		}
	}
	stdinReader, stdinWriter, err := os.Pipe()
	if err != nil {
		return err
	}
	pipes, err := newOutputPipes()
	if err != nil {
		stdinReader.Close()
		stdinWriter.Close()
		return err
	}
	cwd, cwdErr := a.resolveCwd(request.Cwd)
	cmd := exec.Command("/bin/sh", "-c", request.Command)
	cmd.Dir, cmd.Env = cwd, commandEnv(request.Env)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = stdinReader, pipes.stdoutWriter, pipes.stderrWriter
	startErr := cwdErr
	if startErr == nil {
		startErr = startInSession(cmd)
	}
	stdinReader.Close()
	if startErr != nil {
		stdinWriter.Close()
		pipes.closeAll()
		p.writeOutput(streamStderr, []byte("machine-agent: "+startErr.Error()+"\n"))
		return p.finish(startFailureCode(cwdErr != nil))
	}
	pipes.closeWriters()
	p.pid, p.stdin, p.running = cmd.Process.Pid, stdinWriter, true
	if err := os.WriteFile(filepath.Join(p.dir, "pid"), []byte(strconv.Itoa(p.pid)+"\n"), 0o644); err != nil {
		log.Printf("process record %s: %v", p.dir, err) // it runs already: it is served all the same
	}
	go p.supervise(cmd, pipes)
	return nil
}

// supervise waits for the process and its output, then records its exit.
func (p *process) supervise(cmd *exec.Cmd, pipes *outputPipes) {
	exited := make(chan struct{})
	drained := make(chan struct{})
	go func() {
		pipes.drain(exited, p.writeOutput)
		close(drained)
	}()
	cmd.Wait()
	p.mu.Lock()
	p.running = false
	p.mu.Unlock()
	p.stdin.Close()
	close(exited)
	<-drained
	if err := p.finish(exitCodeOf(cmd.ProcessState)); err != nil {
		log.Printf("process %s: %v", p.id, err)
	}
}

func (p *process) writeOutput(stream byte, data []byte) {
	if err := p.output.write(stream, data); err != nil {
		log.Printf("process %s: %v", p.id, err)
	}
}

// finish records the exit on disk, then says so to readers of the output.
func (p *process) finish(code int) error {
	err := writeFileAtomically(filepath.Join(p.dir, "exit"), []byte(strconv.Itoa(code)+"\n"))
	p.mu.Lock()
	p.exitCode, p.endReason = &code, "exited"
	p.mu.Unlock()
	p.output.close()
	if err != nil {
		return fmt.Errorf("process record: %w", err)
	}
	return nil
}

func (p *process) info() processInfo {
	p.mu.Lock()
	defer p.mu.Unlock()
	info := processInfo{ID: p.id, Command: p.command, Pid: p.pid, Status: "running", ExitCode: p.exitCode, StartedAt: p.startedAt}
	if p.endReason != "" {
		reason := p.endReason
		info.Status, info.EndReason = "exited", &reason
	}
	return info
}

// outputLog is the process's output, opened from its record the first time for one an earlier agent ran.
func (p *process) outputLog() (*outputLog, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.output == nil {
		opened, err := openOutputLog(p.dir)
		if err != nil {
			return nil, fmt.Errorf("process %s: %w", p.id, err)
		}
		p.output = opened
	}
	return p.output, nil
}

// loadProcesses reads the records an earlier agent left. One without exit
// ended with the machine (its boot is not this one) or with that agent.
func (a *agent) loadProcesses() error {
	entries, err := os.ReadDir(a.procsDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("processes: %w", err)
	}
	for _, entry := range entries {
		if entry.IsDir() {
			a.procs[entry.Name()] = a.readProcessRecord(entry.Name())
		}
	}
	return nil
}

func (a *agent) readProcessRecord(id string) *process {
	dir := filepath.Join(a.procsDir(), id)
	read := func(name string) string {
		data, _ := os.ReadFile(filepath.Join(dir, name))
		return string(data)
	}
	recorded := &process{id: id, command: read("command"), dir: dir}
	recorded.pid, _ = strconv.Atoi(strings.TrimSpace(read("pid")))
	recorded.startedAt, _ = strconv.ParseInt(strings.TrimSpace(read("startedAt")), 10, 64)
	if code, err := strconv.Atoi(strings.TrimSpace(read("exit"))); err == nil {
		recorded.exitCode, recorded.endReason = &code, "exited"
	} else if strings.TrimSpace(read("boot")) != a.bootID {
		recorded.endReason = "machine-stopped"
	} else {
		recorded.endReason = "lost"
	}
	return recorded
}

func (a *agent) lookupProcess(id string) (*process, error) {
	a.procsMu.Lock()
	defer a.procsMu.Unlock()
	if found := a.procs[id]; found != nil {
		return found, nil
	}
	return nil, notFound("no process %s", id)
}

func (a *agent) listProcesses(w http.ResponseWriter, r *http.Request, _ []string) error {
	a.procsMu.Lock()
	infos := make([]processInfo, 0, len(a.procs))
	for _, p := range a.procs {
		infos = append(infos, p.info())
	}
	a.procsMu.Unlock()
	sort.Slice(infos, func(i, j int) bool { return infos[i].ID < infos[j].ID })
	return writeJSON(w, http.StatusOK, map[string]interface{}{"data": infos})
}

func (a *agent) getProcess(w http.ResponseWriter, r *http.Request, params []string) error {
	found, err := a.lookupProcess(params[0])
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, found.info())
}

type processOutput struct {
	Stdout    []byte  `json:"stdout"`
	Stderr    []byte  `json:"stderr"`
	Offset    int64   `json:"offset"`
	Dropped   int64   `json:"dropped"`
	Running   bool    `json:"running"`
	ExitCode  *int    `json:"exitCode"`
	EndReason *string `json:"endReason"`
}

func (a *agent) getProcessOutput(w http.ResponseWriter, r *http.Request, params []string) error {
	found, err := a.lookupProcess(params[0])
	if err != nil {
		return err
	}
	offset, err := intParam(r, "offset", 0, 0, math.MaxInt64)
	if err != nil {
		return err
	}
	follow, err := flagParam(r, "follow")
	if err != nil {
		return err
	}
	waitMs, err := intParam(r, "waitMs", 0, 0, math.MaxInt64)
	if err != nil {
		return err
	}
	limit, err := intParam(r, "limit", outputReadDefault, 1, outputReadMax)
	if err != nil {
		return err
	}
	output, err := found.outputLog()
	if err != nil {
		return err
	}
	if follow {
		return followProcessOutput(w, r, found, output, offset)
	}

	read, err := output.read(offset, limit)
	if err != nil {
		return err
	}
	if len(read.chunks) == 0 && !read.closed && waitMs > 0 {
		wait := time.Duration(waitMs) * time.Millisecond
		if wait > outputWaitMax {
			wait = outputWaitMax
		}
		output.wait(r.Context(), read.next, wait)
		if read, err = output.read(offset, limit); err != nil {
			return err
		}
	}
	// The state is the one the read saw: "not running" comes with all the output there is.
	answer := processOutput{Stdout: []byte{}, Stderr: []byte{}, Offset: read.next, Dropped: read.dropped, Running: !read.closed}
	for _, chunk := range read.chunks {
		if chunk.stream == streamStderr {
			answer.Stderr = append(answer.Stderr, chunk.data...)
		} else {
			answer.Stdout = append(answer.Stdout, chunk.data...)
		}
	}
	if read.closed {
		info := found.info()
		answer.ExitCode, answer.EndReason = info.ExitCode, info.EndReason
	}
	return writeJSON(w, http.StatusOK, answer)
}

type processOutputLine struct {
	Type   string `json:"type"` // stdout or stderr
	Data   []byte `json:"data"`
	Offset int64  `json:"offset"`
}

// followProcessOutput streams the output from offset as it comes, then the end.
func followProcessOutput(w http.ResponseWriter, r *http.Request, p *process, output *outputLog, offset int64) error {
	stream := startNDJSON(w)
	for {
		read, err := output.read(offset, outputReadDefault)
		if err != nil {
			log.Printf("process %s: %v", p.id, err)
			panic(http.ErrAbortHandler)
		}
		if read.dropped > 0 {
			if stream.send(map[string]interface{}{"type": "dropped", "bytes": read.dropped}) != nil {
				return nil
			}
		}
		for _, chunk := range read.chunks {
			if stream.send(processOutputLine{Type: streamName(chunk.stream), Data: chunk.data, Offset: chunk.end}) != nil {
				return nil
			}
		}
		offset = read.next
		if len(read.chunks) > 0 {
			continue
		}
		if read.closed {
			info := p.info()
			stream.send(map[string]interface{}{"type": "end", "exitCode": info.ExitCode, "endReason": info.EndReason})
			return nil
		}
		output.wait(r.Context(), offset, time.Hour)
		if r.Context().Err() != nil {
			return nil
		}
	}
}

func (a *agent) postProcessStdin(w http.ResponseWriter, r *http.Request, params []string) error {
	found, err := a.lookupProcess(params[0])
	if err != nil {
		return err
	}
	found.mu.Lock()
	running := found.running
	found.mu.Unlock()
	if !running {
		return conflict("the process %s no longer runs", found.id)
	}

	found.stdinMu.Lock()
	defer found.stdinMu.Unlock()
	// A process that does not read blocks the write: a client that goes away ends it.
	copied := make(chan struct{})
	go func() {
		select {
		case <-r.Context().Done():
			found.stdin.SetWriteDeadline(time.Now())
		case <-copied:
		}
	}()
	_, err = io.Copy(found.stdin, r.Body)
	close(copied)
	found.stdin.SetWriteDeadline(time.Time{})
	switch {
	case err == nil:
		w.WriteHeader(http.StatusNoContent)
		return nil
	case r.Context().Err() != nil:
		return nil
	case errors.Is(err, syscall.EPIPE) || errors.Is(err, os.ErrClosed):
		return conflict("the process %s no longer reads its input", found.id)
	}
	return err
}

var signalsByName = map[string]syscall.Signal{
	"TERM": syscall.SIGTERM,
	"KILL": syscall.SIGKILL,
	"INT":  syscall.SIGINT,
	"HUP":  syscall.SIGHUP,
}

func (a *agent) postProcessSignal(w http.ResponseWriter, r *http.Request, params []string) error {
	var request struct {
		Signal string `json:"signal"`
	}
	if err := decodeJSON(w, r, &request); err != nil {
		return err
	}
	signal, known := signalsByName[request.Signal]
	if !known {
		return invalid("signal must be TERM, KILL, INT or HUP")
	}
	found, err := a.lookupProcess(params[0])
	if err != nil {
		return err
	}
	// running turns false as soon as the process is reaped: its pid is not signalled once it may be reused.
	found.mu.Lock()
	defer found.mu.Unlock()
	if !found.running {
		return conflict("the process %s no longer runs", found.id)
	}
	if err := signalGroup(found.pid, signal); err != nil {
		return fmt.Errorf("signal %s: %w", found.id, err)
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
