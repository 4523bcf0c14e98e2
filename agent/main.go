// The machine agent: one process in every machine, serving the API of
// API.md on a Unix socket; `agent attach` joins a stream (the service's
// engine exec) to that socket.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

const (
	defaultSocket     = "/run/machine-platform/agent.sock"
	defaultRecordsDir = "/var/lib/machine-platform"
	// How often the machine's use of its resources is sampled (GET /v1/metrics).
	sampleEvery = 5 * time.Second
)

const usage = `usage:
  agent serve [--socket PATH] [--records DIR]
  agent attach [--socket PATH] [--wait-ms 10000]
  agent resolver --listen ADDRESS [--upstream ADDRESS]...
  agent resolver-policy JSON
  agent version`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	switch os.Args[1] {
	case "serve":
		os.Exit(serveCommand(os.Args[2:]))
	case "attach":
		os.Exit(attachCommand(os.Args[2:], os.Stdin, os.Stdout))
	case "resolver":
		os.Exit(resolverCommand(os.Args[2:]))
	case "resolver-policy":
		os.Exit(resolverPolicyCommand(os.Args[2:]))
	case "version":
		fmt.Println(agentVersion)
	default:
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
}

func serveCommand(args []string) int {
	flags := flag.NewFlagSet("serve", flag.ContinueOnError)
	socket := flags.String("socket", defaultSocket, "the Unix socket to listen on")
	records := flags.String("records", defaultRecordsDir, "where runs and processes are recorded")
	if flags.Parse(args) != nil {
		return 2
	}
	log.SetPrefix("machine-agent: ")
	// The agent outlives the terminal or exec that started it.
	outliveHangups()

	a, err := newAgent(defaultConfig(*records))
	if err != nil {
		log.Print(err)
		return 1
	}
	listener, err := listenUnix(*socket)
	if err != nil {
		log.Print(err)
		return 1
	}
	go releaseIdleMemory(10 * time.Second)
	go a.metrics.run(sampleEvery)
	if err := serve(listener, a.handler()); err != nil {
		log.Print(err)
		return 1
	}
	return 0
}

// listenUnix listens on the socket, its directory created root-only when
// missing; a socket left by an agent that ended is replaced, one that
// answers is not.
func listenUnix(path string) (net.Listener, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("socket directory: %w", err)
	}
	if _, err := os.Lstat(path); err == nil {
		if conn, err := net.Dial("unix", path); err == nil {
			conn.Close()
			return nil, fmt.Errorf("an agent listens on %s already", path)
		}
		if err := os.Remove(path); err != nil {
			return nil, fmt.Errorf("stale socket: %w", err)
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("socket: %w", err)
	}
	listener, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	os.Chmod(path, 0o600)
	return listener, nil
}

func attachCommand(args []string, stdin io.Reader, stdout io.Writer) int {
	flags := flag.NewFlagSet("attach", flag.ContinueOnError)
	socket := flags.String("socket", defaultSocket, "the agent's Unix socket")
	waitMs := flags.Int("wait-ms", 10000, "how long to wait for the agent to listen")
	if flags.Parse(args) != nil {
		return 2
	}
	conn, err := dialAgent(*socket, time.Duration(*waitMs)*time.Millisecond)
	if err != nil {
		fmt.Fprintf(os.Stderr, "machine-agent attach: no agent answers on %s: %v\n", *socket, err)
		return 3
	}
	relay(conn, stdin, stdout)
	return 0
}

// dialAgent connects to the agent's socket, trying again every 20 ms for
// wait: a machine that has just started may not have its agent listening yet.
func dialAgent(socket string, wait time.Duration) (net.Conn, error) {
	deadline := time.Now().Add(wait)
	for {
		conn, err := net.Dial("unix", socket)
		if err == nil || !time.Now().Before(deadline) {
			return conn, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// relay copies stdin to the connection and the connection to stdout, byte
// for byte, until either side ends.
func relay(conn net.Conn, stdin io.Reader, stdout io.Writer) {
	ended := make(chan struct{}, 2)
	go func() {
		io.Copy(conn, stdin)
		ended <- struct{}{}
	}()
	go func() {
		io.Copy(stdout, conn)
		ended <- struct{}{}
	}()
	<-ended
	conn.Close()
}

// outliveHangups keeps the agent running through a hangup, and through an interrupt when it was started with
// interrupts ignored (a shell's background job, as in the machine's init). The signals are caught, never
// ignored: an ignored signal stays ignored in every program the agent starts, so a closed terminal would hang
// up on none of its processes, ^C would interrupt nothing, and a process sent HUP would not get it.
func outliveHangups() {
	caught := []os.Signal{syscall.SIGHUP}
	if signal.Ignored(syscall.SIGINT) {
		caught = append(caught, syscall.SIGINT)
	}
	signals := make(chan os.Signal, 1)
	signal.Notify(signals, caught...)
	go func() {
		for range signals {
		}
	}()
}
