package main

import (
	"strings"
	"testing"
	"time"
)

func TestExec(t *testing.T) {
	ta := startTestAgent(t, "", nil)
	cases := []struct {
		name           string
		request        execRequest
		code           int
		stdout, stderr string
	}{
		{name: "stdin to stdout", request: execRequest{Argv: []string{"cat"}, Stdin: []byte("piped")}, stdout: "piped"},
		{name: "arguments, env and exit code", request: execRequest{Argv: []string{"sh", "-c", `echo "$1 $X" >&2; exit 9`, "sh", "arg"}, Env: map[string]string{"X": "y"}}, code: 9, stderr: "arg y\n"},
		{name: "no such program", request: execRequest{Argv: []string{"/nonexistent/program"}}, code: 127},
		{name: "timeout", request: execRequest{Argv: []string{"sleep", "30"}, TimeoutMs: 200}, code: 137},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			ta.t = t
			started := time.Now()
			var result execResult
			ta.call("POST", "/v1/exec", c.request, 200, &result)
			if result.ExitCode != c.code || string(result.Stdout) != c.stdout || (c.stderr != "" && string(result.Stderr) != c.stderr) {
				t.Fatalf("result %d %q %q", result.ExitCode, result.Stdout, result.Stderr)
			}
			if c.code == 127 && !strings.Contains(string(result.Stderr), "nonexistent") {
				t.Fatalf("stderr %q", result.Stderr)
			}
			if time.Since(started) > 5*time.Second {
				t.Fatalf("took %v", time.Since(started))
			}
		})
	}
	ta.t = t
	ta.errorCode("POST", "/v1/exec", execRequest{}, 400)
	ta.errorCode("POST", "/v1/exec", []byte(`{"argv":["cat"],"stdin":"not base64!"}`), 400)
}
