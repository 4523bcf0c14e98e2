package main

import (
	"bytes"
	"fmt"
	"os/exec"
	"strings"
)

// iptablesFirewall changes the engine host's rules (the resolver runs on the
// host's network with NET_ADMIN): iptables-restore --noflush replaces the
// chains its input names and leaves every other rule alone.
type iptablesFirewall struct{}

func (iptablesFirewall) apply(input string) error {
	cmd := exec.Command("iptables-restore", "--noflush", "--wait")
	cmd.Stdin = strings.NewReader(input)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("iptables-restore: %v: %s", err, strings.TrimSpace(stderr.String()))
	}
	return nil
}

func (iptablesFirewall) removeChain(chain string) error {
	// Already gone is fine: forgetting twice must work.
	exec.Command("iptables", "-w", "-F", chain).Run()
	exec.Command("iptables", "-w", "-X", chain).Run()
	return nil
}
