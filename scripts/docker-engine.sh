#!/usr/bin/env bash
# bash scripts/docker-engine.sh: makes sure a Docker engine answers, starting one when none does.
# The engine it starts keeps its data on btrfs, so that machines' disk limits (MACHINE_SIZES' /disk,
# the container's StorageOpt size) are enforced: overlay2 on ext4, the usual default, cannot enforce them.
# Where the host has no btrfs file system to give it, a loop file is made: sparse, so it takes only
# what is written. ENGINE_DATA_FILE and ENGINE_DATA_ROOT choose where; ENGINE_DATA_SIZE its size.
set -euo pipefail


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
  quotas_for_limits
}

# The file system's quota mode: "none", "qgroup" (full quota groups) or "squota" (simple quotas, Linux 6.7+).
quota_mode() {
  local uuid
  uuid=$(btrfs filesystem show "$root" | sed -n 's/.*uuid: \([0-9a-f-]*\).*/\1/p')
  if [ ! -e "/sys/fs/btrfs/$uuid/qgroups/enabled" ]; then echo none; return; fi
  cat "/sys/fs/btrfs/$uuid/qgroups/mode" 2>/dev/null || echo qgroup
}

# BTRFS_IOC_QUOTA_CTL with BTRFS_QUOTA_CTL_ENABLE_SIMPLE_QUOTA: Debian's btrfs-progs (6.2) has no
# `quota enable --simple` yet, and perl is on every Debian system.
enable_simple_quotas() {
  perl -e 'open(my $fh, "<", $ARGV[0]) or die "$!\n"; my $args = pack("QQ", 4, 0); ioctl($fh, 0xC0109428, $args) or die "$!\n"' "$root" 2>/dev/null
}

# The engine limits a machine's disk with a quota group on its subvolume. Simple quotas count each write
# against the subvolume that made it, so removing a machine is a plain delete. Full quota groups walk
# every extent a removed machine shared with its image: a few hundred machines removed, and the
# kernel's cleaner is so far behind that creating a container waits 15-40 s (0.5 s with simple quotas,
# measured on one host; see docs/architecture.md). Quotas must count from the first write: enabled
# later, they count nothing until rescanned, and a machine writes past its limit.
quotas_for_limits() {
  local mode
  mode=$(quota_mode)
  if [ "$mode" = qgroup ] && ! grep -qs '"StorageOpt":{"size"' "$root"/containers/*/hostconfig.json; then
    # Made by an earlier version of this script. No container has a limit to lose: change the mode.
    echo "Switching $root from full quota groups to simple quotas (no container has a disk limit yet)"
    btrfs quota disable "$root"
    mode=none
  fi
  if [ "$mode" = none ]; then
    if enable_simple_quotas; then return 0; fi
    echo "This kernel has no simple quotas (Linux 6.7+): full quota groups, slower to remove machines" >&2
    btrfs quota enable "$root"
    mode=qgroup
  fi
  if [ "$mode" = qgroup ] && btrfs qgroup show "$root" 2>&1 | grep -qi inconsistent; then
    btrfs quota rescan -w "$root" >/dev/null
  fi
}

if docker info >/dev/null 2>&1; then
  echo "A Docker engine already answers ($(docker info --format '{{.Driver}}') storage driver)"
  # Docker's btrfs driver turns the file system's quotas off whenever a daemon storing on it stops (another
  # engine sharing it, say), and then no machine with a disk limit can be created: turned on again here.
  if [ "$(docker info --format '{{.Driver}}')" = btrfs ] && mountpoint -q "$root" && [ "$(quota_mode)" = none ]; then
    echo "Quotas were off on $root: turning them on again (machines' disk limits need them)" >&2
    quotas_for_limits
  fi
  exit 0
fi

if on_btrfs; then
  start_engine --data-root "$root" --storage-driver btrfs
  echo "Started a Docker engine on btrfs at $root (machines' disks are limited)"
else
  echo "Starting a Docker engine with its default storage: machines' disks will NOT be limited" >&2
  start_engine
fi
