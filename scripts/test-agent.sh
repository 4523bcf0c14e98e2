#!/usr/bin/env bash
# scripts/test-agent.sh [go test flags]: vets and tests the machine agent
# (agent/) as it is built, in-process on temporary sockets: no Docker, no
# root-owned paths. Runs from any directory; `-run Terminal -v` narrows it.
set -euo pipefail
cd "$(dirname "$0")/.."
export CGO_ENABLED=0 GO111MODULE=off GOPATH=/usr/share/gocode
go vet ./agent
go test "$@" ./agent
