package main

import (
	"os"
	"strings"
	"testing"
)

func TestCommandEnv(t *testing.T) {
	for _, name := range []string{"HOME", "PATH"} {
		if value, set := os.LookupEnv(name); set {
			os.Unsetenv(name)
			defer os.Setenv(name, value)
		}
	}
	env := strings.Join(commandEnv(map[string]string{"B": "2", "A": "1", "HOME": "/home/x"}), "\n")
	want := "HOME=/root\nPATH=" + defaultPath + "\nA=1\nB=2\nHOME=/home/x" // exec.Cmd keeps the last HOME
	if !strings.HasSuffix(env, want) {
		t.Fatalf("env ends with\n%s", env[strings.LastIndex(env, "HOME=/root"):])
	}
}

func TestCommandEnvKeepsTheAgentsHomeAndPath(t *testing.T) {
	t.Setenv("HOME", "/agent-home")
	t.Setenv("PATH", "/agent-bin")
	env := strings.Join(commandEnv(nil), "\n")
	if strings.Contains(env, "HOME=/root") || strings.Contains(env, defaultPath) {
		t.Fatalf("defaults added to %s", env)
	}
}
