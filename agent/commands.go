package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
)

// How runs, processes, terminals and exec start their commands.

const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// The two output streams, as tagged in a process's output log.
const (
	streamStdout byte = 'o'
	streamStderr byte = 'e'
)

func streamName(stream byte) string {
	if stream == streamStderr {
		return "stderr"
	}
	return "stdout"
}

// commandEnv is the agent's environment, HOME and PATH where it has none,
// then the request's variables (exec.Cmd keeps the last value of a name).
func commandEnv(extra map[string]string) []string {
	env := os.Environ()
	if _, ok := os.LookupEnv("HOME"); !ok {
		env = append(env, "HOME=/root")
	}
	if _, ok := os.LookupEnv("PATH"); !ok {
		env = append(env, "PATH="+defaultPath)
	}
	names := make([]string, 0, len(extra))
	for name := range extra {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		env = append(env, name+"="+extra[name])
	}
	return env
}

func checkEnv(env map[string]string) error {
	for name, value := range env {
		if name == "" || strings.ContainsAny(name, "=\x00") || strings.ContainsRune(value, 0) {
			return invalid("env: %q is not a variable name and value", name)
		}
	}
	return nil
}

// resolveCwd is the directory a command runs in; an error says why it cannot.
func (a *agent) resolveCwd(cwd *string) (string, error) {
	dir := a.defaultCwd
	if cwd != nil && *cwd != "" {
		dir = *cwd
		if !filepath.IsAbs(dir) {
			dir = filepath.Join(a.defaultCwd, dir)
		}
	}
	info, err := os.Stat(dir)
	if err != nil {
		return dir, fmt.Errorf("cannot run in %s: %w", dir, err)
	}
	if !info.IsDir() {
		return dir, fmt.Errorf("cannot run in %s: not a directory", dir)
	}
	return dir, nil
}

// startInSession starts a command in a session of its own, so a timeout or
// a signal reaches all it started through its process group.
func startInSession(cmd *exec.Cmd) error {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	// First in line for the kernel's out-of-memory killer: a command that
	// exhausts the machine is killed rather than its init or its screen.
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/oom_score_adj", cmd.Process.Pid), []byte("500"), 0)
	return nil
}

// signalGroup signals the process group led by pid (its session), or the
// process alone when it has left its group.
func signalGroup(pid int, signal syscall.Signal) error {
	err := syscall.Kill(-pid, signal)
	if err == syscall.ESRCH {
		err = syscall.Kill(pid, signal)
	}
	return err
}

// exitCodeOf is the exit code as a shell reports it: 128 + the signal for a killed command.
func exitCodeOf(state *os.ProcessState) int {
	if status, ok := state.Sys().(syscall.WaitStatus); ok && status.Signaled() {
		return 128 + int(status.Signal())
	}
	return state.ExitCode()
}

// startFailureCode is the exit code recorded for a command that could not
// start: 2 for a working directory it cannot use (what `cd` exits with), 127 otherwise.
func startFailureCode(cwdError bool) int {
	if cwdError {
		return 2
	}
	return 127
}

// outputPipes are a command's stdout and stderr: the write ends go to it, the agent reads the others.
type outputPipes struct {
	stdoutReader, stdoutWriter *os.File
	stderrReader, stderrWriter *os.File
}

func newOutputPipes() (*outputPipes, error) {
	stdoutReader, stdoutWriter, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	stderrReader, stderrWriter, err := os.Pipe()
	if err != nil {
		stdoutReader.Close()
		stdoutWriter.Close()
		return nil, err
	}
	return &outputPipes{stdoutReader, stdoutWriter, stderrReader, stderrWriter}, nil
}

// closeWriters is called once the command has started: from then on only it holds the write ends.
func (p *outputPipes) closeWriters() {
	p.stdoutWriter.Close()
	p.stderrWriter.Close()
}

func (p *outputPipes) closeAll() {
	p.closeWriters()
	p.stdoutReader.Close()
	p.stderrReader.Close()
}

// outputGrace is how long what a command left in the background may keep
// its output open after the command exited (the old shell agent gave it the same).
const outputGrace = time.Second

// drain calls write with each read of stdout and stderr until both close.
// Once exited is closed, the rest gets outputGrace to come; then the agent
// stops reading. write may keep data only by copying it.
func (p *outputPipes) drain(exited <-chan struct{}, write func(stream byte, data []byte)) {
	var readers sync.WaitGroup
	read := func(stream byte, from *os.File) {
		defer readers.Done()
		buffer := make([]byte, 32<<10)
		for {
			n, err := from.Read(buffer)
			if n > 0 {
				write(stream, buffer[:n])
			}
			if err != nil {
				return
			}
		}
	}
	readers.Add(2)
	go read(streamStdout, p.stdoutReader)
	go read(streamStderr, p.stderrReader)

	drained := make(chan struct{})
	go func() { readers.Wait(); close(drained) }()
	select {
	case <-drained:
	case <-exited:
		deadline := time.Now().Add(outputGrace)
		p.stdoutReader.SetReadDeadline(deadline)
		p.stderrReader.SetReadDeadline(deadline)
		<-drained
	}
	p.stdoutReader.Close()
	p.stderrReader.Close()
}
