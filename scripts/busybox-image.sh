#!/usr/bin/env bash
# Builds machine-platform/busybox:<package version>: a machine image with no C library and
# nothing but Debian's static BusyBox (busybox-static), as small as Alpine's, for checking that
# machines work on any Linux image: the machine agent is static and brings everything it needs.
# MACHINE_IMAGE=machine-platform/busybox:<version> runs machines from it (they have no screen).
set -euo pipefail
cd "$(dirname "$0")/.."

version=$(node -p "require('./package.json').version")
tag="machine-platform/busybox:$version"
if docker image inspect "$tag" >/dev/null 2>&1 && [ "${1:-}" != "--force" ]; then
  echo "$tag is already built (--force builds it again)"
  exit 0
fi
busybox=/bin/busybox
if ! file -L "$busybox" 2>/dev/null | grep -q 'statically linked'; then
  echo "No static BusyBox at $busybox: apt-get install busybox-static" >&2
  exit 1
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir"/{bin,sbin,usr/bin,usr/sbin,etc,root,tmp,run,var/lib,proc,sys,dev}
chmod 1777 "$dir/tmp"
cp "$busybox" "$dir/bin/busybox"
for applet in $("$busybox" --list-full); do
  [ -e "$dir/$applet" ] || ln -s /bin/busybox "$dir/$applet"
done
printf 'root:x:0:0:root:/root:/bin/sh\n' > "$dir/etc/passwd"
printf 'root:x:0:\n' > "$dir/etc/group"
: > "$dir/etc/resolv.conf"
tar -C "$dir" --numeric-owner --owner=0 --group=0 -c . | docker import -c 'CMD ["/bin/sh"]' -c 'WORKDIR /root' - "$tag" >/dev/null
echo "Built $tag"
