#!/usr/bin/env bash
# npm run machine-image [-- --force]: builds the default machine image,
# machine-platform/base:<package version> (MACHINE_IMAGE's default).
# On an engine that can pull, from debian:bookworm-slim (machine-image/Dockerfile).
# Where no image registry is reachable, the same packages go into a debootstrap
# root filesystem, imported as machine-platform/rootfs:<version> (kept, so later
# builds reuse it), and the same Dockerfile builds on top of it.
# MACHINE_IMAGE_SOURCE=pull|debootstrap chooses; DEBIAN_MIRROR names the mirror.
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(node -p "require('./package.json').version")
tag="machine-platform/base:$version"
if [ "${1:-}" != "--force" ] && docker image inspect "$tag" >/dev/null 2>&1; then
  echo "$tag is already built (--force builds it again)"
  exit 0
fi

source=${MACHINE_IMAGE_SOURCE:-}
if [ -z "$source" ]; then
  if docker image inspect debian:bookworm-slim >/dev/null 2>&1 || timeout 120 docker pull -q debian:bookworm-slim >/dev/null 2>&1; then
    source=pull
  else
    source=debootstrap
  fi
fi

if [ "$source" = pull ]; then
  docker build -t "$tag" machine-image
else
  rootfs="machine-platform/rootfs:$version"
  if ! docker image inspect "$rootfs" >/dev/null 2>&1; then
    command -v debootstrap >/dev/null || { echo "No image registry reachable and no debootstrap: apt-get install debootstrap" >&2; exit 1; }
    dir=$(mktemp -d)
    trap 'rm -rf "$dir"' EXIT
    packages=$(grep -v '^#' machine-image/packages.txt | grep . | paste -sd, -)
    echo "Building a Debian root filesystem with debootstrap (a few minutes)..."
    debootstrap --variant=minbase --include="$packages" bookworm "$dir" "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" >/dev/null
    rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
    tar -C "$dir" --numeric-owner -c . | docker import - "$rootfs" >/dev/null
  fi
  docker build --build-arg BASE="$rootfs" -t "$tag" machine-image
fi
echo "Built $tag"
