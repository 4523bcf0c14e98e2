package main

import (
	"bytes"
	"net/http"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// exec runs a short program and answers its exit code and output: the
// screen's xdotool and scrot. Nothing is recorded.

const (
	execTimeoutDefault = time.Minute
	execOutputMax      = 64 << 20 // per stream: a runaway program must not exhaust the agent
)

type execRequest struct {
	Argv      []string          `json:"argv"`
	Stdin     []byte            `json:"stdin"` // base64
	Env       map[string]string `json:"env"`
	TimeoutMs int64             `json:"timeoutMs"`
}

type execResult struct {
	ExitCode int    `json:"exitCode"`
	Stdout   []byte `json:"stdout"`
	Stderr   []byte `json:"stderr"`
}

func (a *agent) exec(w http.ResponseWriter, r *http.Request, _ []string) error {
	var request execRequest
	if err := decodeJSON(w, r, &request); err != nil {
		return err
	}
	if len(request.Argv) == 0 || request.Argv[0] == "" {
		return invalid("argv must name a program")
	}
	if request.TimeoutMs < 0 {
		return invalid("timeoutMs must not be negative")
	}
	if err := checkEnv(request.Env); err != nil {
		return err
	}
	timeout := execTimeoutDefault
	if request.TimeoutMs > 0 {
		timeout = time.Duration(request.TimeoutMs) * time.Millisecond
	}

	stdout := &boundedBuffer{limit: execOutputMax}
	stderr := &boundedBuffer{limit: execOutputMax}
	cmd := exec.Command(request.Argv[0], request.Argv[1:]...)
	cmd.Env = commandEnv(request.Env)
	if info, err := os.Stat(a.defaultCwd); err == nil && info.IsDir() {
		cmd.Dir = a.defaultCwd
	}
	cmd.Stdin = bytes.NewReader(request.Stdin)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	result := execResult{}
	if err := startInSession(cmd); err != nil {
		result.ExitCode = 127
		stderr.Write([]byte("machine-agent: " + err.Error() + "\n"))
	} else {
		timer := time.AfterFunc(timeout, func() { signalGroup(cmd.Process.Pid, syscall.SIGKILL) })
		cmd.Wait()
		timer.Stop()
		result.ExitCode = exitCodeOf(cmd.ProcessState)
	}
	// Never null in JSON: an empty output is "".
	result.Stdout = append([]byte{}, stdout.Bytes()...)
	result.Stderr = append([]byte{}, stderr.Bytes()...)
	return writeJSON(w, http.StatusOK, result)
}

// boundedBuffer keeps the first limit bytes written to it and drops the rest.
type boundedBuffer struct {
	bytes.Buffer
	limit int
}

func (b *boundedBuffer) Write(data []byte) (int, error) {
	if room := b.limit - b.Len(); room > 0 {
		if len(data) > room {
			b.Buffer.Write(data[:room])
		} else {
			b.Buffer.Write(data)
		}
	}
	return len(data), nil
}
