package main

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/creack/pty"
)

// A terminal is a PTY and its shell for as long as one request lasts: the
// request's body is its input, the response its output (full duplex over
// HTTP/2). Resizes come on a request of their own, by the terminal's id.

type terminal struct {
	pty     *os.File
	cmd     *exec.Cmd
	endOnce sync.Once
}

func (a *agent) openTerminal(w http.ResponseWriter, r *http.Request, _ []string) error {
	cols, err := intParam(r, "cols", 80, 1, 65535)
	if err != nil {
		return err
	}
	rows, err := intParam(r, "rows", 24, 1, 65535)
	if err != nil {
		return err
	}
	var cwdParam *string
	if cwd := r.URL.Query().Get("cwd"); cwd != "" {
		cwdParam = &cwd
	}
	cwd, err := a.resolveCwd(cwdParam)
	if err != nil {
		return invalid("%v", err)
	}
	cmd := exec.Command(loginShell())
	if command := r.URL.Query().Get("command"); command != "" {
		cmd = exec.Command("/bin/sh", "-c", command)
	}
	cmd.Dir, cmd.Env = cwd, commandEnv(nil)
	if _, set := os.LookupEnv("TERM"); !set {
		cmd.Env = append(cmd.Env, "TERM=xterm-256color")
	}
	// pty starts it in a session of its own, the PTY its controlling terminal.
	started, err := pty.StartWithSize(cmd, &pty.Winsize{Cols: uint16(cols), Rows: uint16(rows)})
	if err != nil {
		return err
	}
	ptmx, err := pollable(started)
	if err != nil {
		signalGroup(cmd.Process.Pid, syscall.SIGKILL)
		go cmd.Wait()
		return err
	}
	opened := &terminal{pty: ptmx, cmd: cmd}
	id := newTerminalID()
	a.terminalsMu.Lock()
	a.terminals[id] = opened
	a.terminalsMu.Unlock()
	defer func() {
		a.terminalsMu.Lock()
		delete(a.terminals, id)
		a.terminalsMu.Unlock()
		opened.end()
	}()

	w.Header().Set("X-Terminal-Id", id)
	w.Header().Set("Content-Type", "application/octet-stream")
	w.WriteHeader(http.StatusOK)
	w.(http.Flusher).Flush()
	go func() {
		io.Copy(ptmx, r.Body)
		opened.end() // the client closed its side
	}()
	go func() {
		<-r.Context().Done()
		opened.end() // the client went away
	}()
	copyFlushing(w, ptmx) // until the shell's side closes, or end closes the PTY
	return nil
}

// end hangs up on every process of the terminal's session and lets the PTY go; once, whoever comes first.
// The whole session, not only the shell's process group: a shell with job control puts each job in a group
// of its own, and sh (unlike bash) does not pass the hangup on, so `sleep 600 &` would outlive a closed
// terminal. What was started detached goes on, as after closing any terminal: setsid left the session,
// nohup ignores the signal.
func (t *terminal) end() {
	t.endOnce.Do(func() {
		hangUpSession(t.cmd.Process.Pid)
		t.pty.Close()
		go t.cmd.Wait()
	})
}

// hangUpSession sends SIGHUP to the processes of the session led by sid (the terminal's shell: pty starts it
// with setsid), found in /proc; to its process group at least, should /proc not say.
func hangUpSession(sid int) {
	signalGroup(sid, syscall.SIGHUP)
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, entry := range entries {
		pid, err := strconv.Atoi(entry.Name())
		if err != nil || pid == sid {
			continue
		}
		if session, ok := sessionOf(pid); ok && session == sid {
			syscall.Kill(pid, syscall.SIGHUP)
		}
	}
}

// sessionOf reads a process's session id from /proc/<pid>/stat: the sixth field, counted after the command's
// name, which is in parentheses and may hold spaces and parentheses itself.
func sessionOf(pid int) (int, bool) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	end := bytes.LastIndexByte(stat, ')')
	if end < 0 {
		return 0, false
	}
	// After the name: state, ppid, pgrp, session.
	fields := strings.Fields(string(stat[end+1:]))
	if len(fields) < 4 {
		return 0, false
	}
	session, err := strconv.Atoi(fields[3])
	return session, err == nil
}

// pollable answers the PTY as a file the runtime polls, closing the one pty opened: pty's calls to Fd() left
// that one blocking, and a read blocked in the kernel is not woken by Close. A process started detached from
// the terminal may keep the PTY's other side open for good; the terminal must still end when it is closed.
func pollable(ptmx *os.File) (*os.File, error) {
	fd, err := syscall.Dup(int(ptmx.Fd()))
	ptmx.Close()
	if err != nil {
		return nil, fmt.Errorf("duplicating the PTY: %w", err)
	}
	syscall.CloseOnExec(fd)
	if err := syscall.SetNonblock(fd, true); err != nil {
		syscall.Close(fd)
		return nil, fmt.Errorf("making the PTY non-blocking: %w", err)
	}
	return os.NewFile(uintptr(fd), "/dev/ptmx"), nil
}

// loginShell is the machine's: $SHELL, else /bin/bash, else /bin/sh.
func loginShell() string {
	if shell := os.Getenv("SHELL"); shell != "" {
		return shell
	}
	if _, err := os.Stat("/bin/bash"); err == nil {
		return "/bin/bash"
	}
	return "/bin/sh"
}

func newTerminalID() string {
	random := make([]byte, 12)
	rand.Read(random)
	return "term_" + hex.EncodeToString(random)
}

func (a *agent) resizeTerminal(w http.ResponseWriter, r *http.Request, params []string) error {
	var size struct {
		Cols int `json:"cols"`
		Rows int `json:"rows"`
	}
	if err := decodeJSON(w, r, &size); err != nil {
		return err
	}
	if size.Cols < 1 || size.Cols > 65535 || size.Rows < 1 || size.Rows > 65535 {
		return invalid("cols and rows must be from 1 to 65535")
	}
	a.terminalsMu.Lock()
	found := a.terminals[params[0]]
	a.terminalsMu.Unlock()
	if found == nil {
		return notFound("no terminal %s", params[0])
	}
	if err := pty.Setsize(found.pty, &pty.Winsize{Cols: uint16(size.Cols), Rows: uint16(size.Rows)}); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
