package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"regexp"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/net/http2"
)

const (
	agentVersion = "1.0.0"
	apiVersion   = 1
)

// config is what differs between a machine and a test.
type config struct {
	recordsDir  string // runs/ and procs/ live under it
	defaultCwd  string // where commands run when the request names no cwd
	bootID      string // the machine's boot, as /proc/1/stat says
	segmentSize int64  // bytes in one segment of a process's output log
	maxSegments int    // segments kept per process: older output is dropped
	metrics     metricsSources
	samplesKept int // the newest samples kept (an hour's at one every 5 s)
}

func defaultConfig(recordsDir string) config {
	return config{
		recordsDir:  recordsDir,
		defaultCwd:  "/root",
		segmentSize: 16 << 20,
		maxSegments: 4,
		metrics:     metricsSources{cgroupDir: "/sys/fs/cgroup", procDir: "/proc", diskPath: "/", diskEvery: time.Minute},
		samplesKept: 720,
	}
}

// agent holds every operation's state; its methods are the API's handlers.
type agent struct {
	config
	startedAt int64

	runsMu       sync.Mutex
	runs         map[string]*run // runs this agent executes now, by id
	cleaningRuns sync.Mutex      // one sweep of old run records at a time

	procsMu sync.Mutex
	procs   map[string]*process // every recorded process, by id

	terminalsMu sync.Mutex
	terminals   map[string]*terminal

	metrics *sampler // sampled by `agent serve` (sampleEvery); tests call take
}

// newAgent loads the process records left by an earlier agent, so they are listed with why they ended.
func newAgent(cfg config) (*agent, error) {
	if cfg.bootID == "" {
		boot, err := readBootID()
		if err != nil {
			return nil, err
		}
		cfg.bootID = boot
	}
	a := &agent{
		config:    cfg,
		startedAt: nowMs(),
		runs:      map[string]*run{},
		procs:     map[string]*process{},
		terminals: map[string]*terminal{},
		metrics:   newSampler(cfg.metrics, cfg.samplesKept),
	}
	if err := a.loadProcesses(); err != nil {
		return nil, err
	}
	return a, nil
}

// serve answers every connection accepted on the listener with HTTP/2 with
// prior knowledge: the service's one `agent attach` stream carries all its
// operations at once.
func serve(listener net.Listener, handler http.Handler) error {
	// Watches, follows and terminals stay open: allow many more than the default 250 streams.
	server := &http2.Server{MaxConcurrentStreams: 4096}
	for {
		conn, err := listener.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("accept: %w", err)
		}
		go func() {
			server.ServeConn(conn, &http2.ServeConnOpts{Handler: handler})
			conn.Close()
		}()
	}
}

// releaseIdleMemory gives back to the machine what a burst of work left
// behind: Go keeps freed memory for reuse until a collection that an idle
// agent has no reason to run.
func releaseIdleMemory(every time.Duration) {
	for range time.Tick(every) {
		var stats runtime.MemStats
		runtime.ReadMemStats(&stats)
		if stats.HeapIdle-stats.HeapReleased > 1<<20 {
			debug.FreeOSMemory()
		}
	}
}

// readBootID is the start time of the machine's first process (/proc/1/stat,
// field 22): it changes when the machine restarts.
func readBootID() (string, error) {
	stat, err := os.ReadFile("/proc/1/stat")
	if err != nil {
		return "", fmt.Errorf("boot id: %w", err)
	}
	// Field 2 is the command in parentheses and may hold spaces: count from the last ')'.
	afterName := string(stat[strings.LastIndexByte(string(stat), ')')+1:])
	fields := strings.Fields(afterName)
	const startTimeAfterName = 22 - 3
	if len(fields) <= startTimeAfterName {
		return "", fmt.Errorf("boot id: /proc/1/stat has %d fields", len(fields)+2)
	}
	return fields[startTimeAfterName], nil
}

func nowMs() int64 { return time.Now().UnixMilli() }

// --- Routes ---

type handlerFunc func(w http.ResponseWriter, r *http.Request, params []string) error

type route struct {
	method  string
	pattern []string // path segments after /v1; "*" is a parameter
	handle  handlerFunc
}

func (a *agent) routes() []route {
	r := func(method, pattern string, handle handlerFunc) route {
		return route{method, strings.Split(pattern, "/"), handle}
	}
	return []route{
		r("GET", "health", a.health),
		r("POST", "runs", a.postRun),
		r("POST", "processes", a.postProcess),
		r("GET", "processes", a.listProcesses),
		r("GET", "processes/*", a.getProcess),
		r("GET", "processes/*/output", a.getProcessOutput),
		r("POST", "processes/*/stdin", a.postProcessStdin),
		r("POST", "processes/*/signal", a.postProcessSignal),
		r("GET", "files/stat", a.statFile),
		r("GET", "files/list", a.listFiles),
		r("GET", "files/content", a.readFile),
		r("PUT", "files/content", a.writeFile),
		r("DELETE", "files", a.deleteFile),
		r("GET", "files/watch", a.watchFiles),
		r("POST", "terminals", a.openTerminal),
		r("POST", "terminals/*/resize", a.resizeTerminal),
		r("POST", "ports/*/connect", a.connectPort),
		r("POST", "exec", a.exec),
		r("GET", "metrics", a.getMetrics),
	}
}

// handler routes requests to the agent's handlers and writes their errors.
func (a *agent) handler() http.Handler {
	routes := a.routes()
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		err := dispatch(routes, w, r)
		if err != nil {
			writeError(w, r, err)
		}
	})
}

func dispatch(routes []route, w http.ResponseWriter, r *http.Request) error {
	if !strings.HasPrefix(r.URL.Path, "/v1/") {
		return notFound("no route for %s %s", r.Method, r.URL.Path)
	}
	segments := strings.Split(strings.TrimPrefix(r.URL.Path, "/v1/"), "/")
	for _, route := range routes {
		if params, ok := match(route.pattern, segments); ok && route.method == r.Method {
			return route.handle(w, r, params)
		}
	}
	return notFound("no route for %s %s", r.Method, r.URL.Path)
}

func match(pattern, segments []string) (params []string, ok bool) {
	if len(pattern) != len(segments) {
		return nil, false
	}
	for i, part := range pattern {
		switch {
		case part == "*" && segments[i] != "":
			params = append(params, segments[i])
		case part != segments[i]:
			return nil, false
		}
	}
	return params, true
}

func (a *agent) health(w http.ResponseWriter, r *http.Request, _ []string) error {
	hostname, _ := os.Hostname()
	return writeJSON(w, http.StatusOK, map[string]interface{}{
		"version":   agentVersion,
		"api":       apiVersion,
		"bootId":    a.bootID,
		"hostname":  hostname,
		"pid":       os.Getpid(),
		"startedAt": a.startedAt,
	})
}

// --- Errors ---

// apiError is an answer the API defines: a status, a code and a message for a person.
type apiError struct {
	status  int
	code    string
	message string
	extra   map[string]string // more fields of the error body
}

func (e *apiError) Error() string { return e.message }

func invalid(format string, args ...interface{}) *apiError {
	return &apiError{status: http.StatusBadRequest, code: "invalid_request", message: fmt.Sprintf(format, args...)}
}

func notFound(format string, args ...interface{}) *apiError {
	return &apiError{status: http.StatusNotFound, code: "not_found", message: fmt.Sprintf(format, args...)}
}

func conflict(format string, args ...interface{}) *apiError {
	return &apiError{status: http.StatusConflict, code: "conflict", message: fmt.Sprintf(format, args...)}
}

func unreachable(format string, args ...interface{}) *apiError {
	return &apiError{status: http.StatusBadGateway, code: "unreachable", message: fmt.Sprintf(format, args...)}
}

func writeError(w http.ResponseWriter, r *http.Request, err error) {
	var known *apiError
	if !errors.As(err, &known) {
		log.Printf("%s %s: %v", r.Method, r.URL.Path, err)
		known = &apiError{status: http.StatusInternalServerError, code: "internal", message: err.Error()}
	}
	body := map[string]string{"error": known.code, "message": known.message}
	for key, value := range known.extra {
		body[key] = value
	}
	writeJSON(w, known.status, body)
}

func writeJSON(w http.ResponseWriter, status int, body interface{}) error {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	return json.NewEncoder(w).Encode(body)
}

// maxJSONBody bounds a JSON request body (exec's stdin is the largest).
const maxJSONBody = 64 << 20

func decodeJSON(w http.ResponseWriter, r *http.Request, into interface{}) error {
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxJSONBody)).Decode(into); err != nil {
		return invalid("the body is not the JSON expected: %v", err)
	}
	return nil
}

// --- Streams ---

// ndjsonStream writes one JSON object a line, each flushed to the client as it is written.
type ndjsonStream struct {
	w       http.ResponseWriter
	flusher http.Flusher
	encoder *json.Encoder
}

func startNDJSON(w http.ResponseWriter) *ndjsonStream {
	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	stream := &ndjsonStream{w: w, flusher: w.(http.Flusher), encoder: json.NewEncoder(w)}
	stream.flusher.Flush()
	return stream
}

func (s *ndjsonStream) send(line interface{}) error {
	if err := s.encoder.Encode(line); err != nil {
		return err
	}
	s.flusher.Flush()
	return nil
}

// copyFlushing copies from a source to the response as it comes, each read flushed at once.
func copyFlushing(w http.ResponseWriter, from io.Reader) error {
	flusher := w.(http.Flusher)
	buffer := make([]byte, 32<<10)
	for {
		n, err := from.Read(buffer)
		if n > 0 {
			if _, writeErr := w.Write(buffer[:n]); writeErr != nil {
				return writeErr
			}
			flusher.Flush()
		}
		if err != nil {
			if err == io.EOF {
				return nil
			}
			return err
		}
	}
}

// --- Parameters ---

// Ids name record directories: letters, digits, '_', '-' and '.', not starting with '.'.
var validID = regexp.MustCompile(`^[A-Za-z0-9_-][A-Za-z0-9_.-]{0,127}$`)

func checkID(id string) error {
	if !validID.MatchString(id) {
		return invalid("the id %q is not 1-128 letters, digits, '_', '-' or '.' (not first)", id)
	}
	return nil
}

// intParam is a query parameter as an integer in [min, max], or fallback when absent.
func intParam(r *http.Request, name string, fallback, min, max int64) (int64, error) {
	text := r.URL.Query().Get(name)
	if text == "" {
		return fallback, nil
	}
	value, err := strconv.ParseInt(text, 10, 64)
	if err != nil || value < min || value > max {
		return 0, invalid("%s must be an integer from %d to %d", name, min, max)
	}
	return value, nil
}

// flagParam is a query parameter 0|1 (also false|true), false when absent.
func flagParam(r *http.Request, name string) (bool, error) {
	switch r.URL.Query().Get(name) {
	case "", "0", "false":
		return false, nil
	case "1", "true":
		return true, nil
	}
	return false, invalid("%s must be 0 or 1", name)
}
