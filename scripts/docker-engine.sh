#!/usr/bin/env bash
# bash scripts/docker-engine.sh: makes sure a Docker engine answers, starting one when none does.
# The engine it starts keeps its data on btrfs, so that machines' disk limits (MACHINE_SIZES' /disk,
# the container's StorageOpt size) are enforced: overlay2 on ext4, the usual default, cannot enforce them.
# Where the host has no btrfs file system to give it, a loop file is made: sparse, so it takes only
# what is written. ENGINE_DATA_FILE and ENGINE_DATA_ROOT choose where; ENGINE_DATA_SIZE its size.
set -euo pipefail

if docker info >/dev/null 2>&1; then
  echo "A Docker engine already answers ($(docker info --format '{{.Driver}}') storage driver)"
  exit 0
fi

file=${ENGINE_DATA_FILE:-/var/lib/machine-platform-engine.btrfs}
root=${ENGINE_DATA_ROOT:-/var/lib/machine-platform-engine}
size=${ENGINE_DATA_SIZE:-60G}
log=${ENGINE_LOG:-/var/log/machine-platform-dockerd.log}

start_engine() {
  setsid dockerd "$@" >"$log" 2>&1 </dev/null &
  for _ in $(seq 1 90); do
    docker info >/dev/null 2>&1 && return 0
    sleep 1
  done
  echo "dockerd did not answer within 90 s; its log ($log) ends:" >&2
  tail -20 "$log" >&2
  return 1
}

on_btrfs() {
  mkdir -p "$root"
  if ! mountpoint -q "$root"; then
    if [ ! -f "$file" ]; then
      command -v mkfs.btrfs >/dev/null || { echo "no mkfs.btrfs: apt-get install btrfs-progs" >&2; return 1; }
      truncate -s "$size" "$file"
      mkfs.btrfs -q "$file" >/dev/null
    fi
    mount -o loop "$file" "$root" || { echo "could not mount $file on $root (no loop device?)" >&2; return 1; }
  fi
  # Quota groups must count from the first write: enabled later (the engine does it lazily, at its first
  # container with a size), they count nothing until rescanned, and a machine writes past its limit.
  btrfs quota enable "$root"
  if btrfs qgroup show "$root" 2>&1 | grep -qi inconsistent; then
    btrfs quota rescan -w "$root" >/dev/null
  fi
}

if on_btrfs; then
  start_engine --data-root "$root" --storage-driver btrfs
  echo "Started a Docker engine on btrfs at $root (machines' disks are limited)"
else
  echo "Starting a Docker engine with its default storage: machines' disks will NOT be limited" >&2
  start_engine
fi
