#!/usr/bin/env bash
# npm run machine-image [-- --force]: builds the default machine image,
# machine-platform/base:<package version> (MACHINE_IMAGE's default).
# On an engine that can pull, from debian:bookworm-slim (machine-image/Dockerfile).
# Where no image registry is reachable, a debootstrap root filesystem of Debian's
# minimal base, imported as machine-platform/rootfs:bookworm-minbase (kept, so later
# builds reuse it), takes debian:bookworm-slim's place under the same Dockerfile.
# MACHINE_IMAGE_SOURCE=pull|debootstrap chooses; DEBIAN_MIRROR names the mirror.
# The image carries a hash of machine-image/ (label machine-platform.recipe): when the recipe
# changes it is built again, so an engine that keeps its images never runs an older recipe.
set -euo pipefail
cd "$(dirname "$0")/.."

# The machine agent is not in the image: the service puts it into every machine (src/providers/docker/agent-install.ts).
bash scripts/build-agent.sh

version=$(node -p "require('./package.json').version")
tag="machine-platform/base:$version"
recipe=$(cat machine-image/* | sha256sum | cut -c1-16)
built=$(docker image inspect -f '{{index .Config.Labels "machine-platform.recipe"}}' "$tag" 2>/dev/null || true)
if [ "${1:-}" != "--force" ] && [ "$built" = "$recipe" ]; then
  echo "$tag is already built from this recipe (--force builds it again)"
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
  docker build --label "machine-platform.recipe=$recipe" -t "$tag" machine-image
else
  # Debian's minimal base only: the Dockerfile installs the image's packages on it with apt-get, which, unlike
  # debootstrap, resolves a dependency on a virtual package (GTK's on a D-Bus session bus, for the panel).
  rootfs="machine-platform/rootfs:bookworm-minbase"
  if ! docker image inspect "$rootfs" >/dev/null 2>&1; then
    command -v debootstrap >/dev/null || { echo "No image registry reachable and no debootstrap: apt-get install debootstrap" >&2; exit 1; }
    dir=$(mktemp -d)
    trap 'rm -rf "$dir" "$dir.log"' EXIT
    echo "Building a Debian root filesystem with debootstrap (a few minutes)..."
    if ! debootstrap --variant=minbase bookworm "$dir" "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" > "$dir.log" 2>&1; then
      echo "debootstrap failed; its log ends:" >&2
      tail -30 "$dir.log" >&2
      tail -30 "$dir/debootstrap/debootstrap.log" >&2 2>/dev/null || true
      exit 1
    fi
    rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
    tar -C "$dir" --numeric-owner -c . | docker import - "$rootfs" >/dev/null
  fi
  docker build --label "machine-platform.recipe=$recipe" --build-arg BASE="$rootfs" -t "$tag" machine-image
fi
echo "Built $tag"
