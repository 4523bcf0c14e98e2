#!/usr/bin/env bash
# scripts/build-agent.sh: builds the machine agent (agent/) as one static
# binary, agent/bin/machine-agent, with Debian's Go in GOPATH mode (no module
# proxy: its libraries come from /usr/share/gocode). Runs from any directory.
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_ENABLED=0 GO111MODULE=off GOPATH=/usr/share/gocode
go build -trimpath -ldflags='-s -w' -o agent/bin/machine-agent ./agent
echo "agent/bin/machine-agent: $(stat -c %s agent/bin/machine-agent) bytes"
