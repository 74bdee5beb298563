#!/usr/bin/env bash
# base_image.sh - make the docker image kit-test-base:latest (Debian bookworm minbase + python3) if it is missing:
# debootstrap a rootfs (cached as a tarball in ${KIT_TEST_CACHE:-<repo>/.cache}/kit-test-base.tar) and docker-import it.
# With enroot installed (pyxis_up.sh) it also makes CACHE/kit-test-base.sqsh, the same image as a squashfs for
# `srun --container-image`, once per image (rebuilt when the tarball is newer). Prints the squashfs path, if any.
# Needs DOCKER_HOST (source the docker env.sh) and root. Env: DEBIAN_MIRROR [http://deb.debian.org/debian].
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=_lib.sh
source "$HERE/_lib.sh"

IMAGE=kit-test-base:latest
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
[ -n "${DOCKER_HOST:-}" ] || die "DOCKER_HOST is not set (source DIR/env.sh written by docker_up.sh)"
export PATH=$PATH:/usr/sbin:/sbin
timeout 10 docker version >/dev/null 2>&1 || die "no docker daemon answers on $DOCKER_HOST"
REPO=$(git -C "$HERE" rev-parse --show-toplevel 2>/dev/null) || REPO=$(cd "$HERE/../.." && pwd)
CACHE=${KIT_TEST_CACHE:-$REPO/.cache}
TAR=$CACHE/kit-test-base.tar
SQSH=$CACHE/kit-test-base.sqsh

# squashfs: enroot's own import from the local dockerd, so the image keeps its ENV (PATH, LANG)
squashfs() {
  command -v enroot >/dev/null || return 0
  if [ ! -s "$SQSH" ] || [ "$TAR" -nt "$SQSH" ]; then
    local log=$CACHE/enroot-import.log
    mkdir -p "$CACHE"
    rm -f "$SQSH.tmp"
    enroot import -o "$SQSH.tmp" "dockerd://$IMAGE" >"$log" 2>&1 || { tail -n 20 "$log" >&2; die "enroot import of $IMAGE failed"; }
    mv -f "$SQSH.tmp" "$SQSH"
    rm -f "$log"
  fi
  echo "$SQSH"
}
if docker image inspect "$IMAGE" >/dev/null 2>&1; then squashfs; exit 0; fi

need_root
mkdir -p "$CACHE"

# one builder at a time (parallel CI jobs / test sessions share the cache)
exec 9>"$CACHE/kit-test-base.lock"
flock -w 900 9 || die "timed out waiting for the lock $CACHE/kit-test-base.lock"
if docker image inspect "$IMAGE" >/dev/null 2>&1; then squashfs; exit 0; fi

if [ ! -s "$TAR" ]; then
  command -v debootstrap >/dev/null || die "debootstrap not found; run $HERE/install_deps.sh first"
  ROOTFS=$(mktemp -d "$CACHE/rootfs.XXXXXX")
  cleanup() {
    # a failed debootstrap can leave proc/sys mounted inside the rootfs
    { awk '{print $2}' /proc/mounts | grep -E "^$ROOTFS/" || true; } | sort -r | while read -r m; do umount -l "$m" || true; done
    rm -rf "$ROOTFS" "$TAR.tmp"
  }
  trap cleanup EXIT
  LOG=$CACHE/debootstrap.log
  T0=$(now)
  debootstrap --variant=minbase --include=python3 bookworm "$ROOTFS" "$MIRROR" >"$LOG" 2>&1 ||
    { tail -n 30 "$LOG" >&2; die "debootstrap failed (full log: $LOG)"; }
  note "debootstrap took $(elapsed "$T0")s"
  for f in bash tee cat python3; do
    [ -x "$ROOTFS/usr/bin/$f" ] || [ -x "$ROOTFS/bin/$f" ] || die "rootfs lacks $f"
  done
  rm -rf "$ROOTFS"/var/cache/apt/archives/*.deb "$ROOTFS"/var/cache/apt/*.bin "$ROOTFS"/var/lib/apt/lists/* \
    "$ROOTFS"/var/log/* "$ROOTFS"/tmp/* "$ROOTFS"/debootstrap
  tar --numeric-owner -C "$ROOTFS" -cf "$TAR.tmp" .
  mv -f "$TAR.tmp" "$TAR"
  rm -f "$LOG"
fi

docker import -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' -c 'ENV LANG=C.UTF-8' \
  -c 'CMD ["bash"]' "$TAR" "$IMAGE" >/dev/null || die "docker import of $TAR failed (delete it to rebuild)"
out=$(docker run --rm --network none "$IMAGE" bash -c 'echo hi | tee /dev/null; python3 -c "print(1)"' 2>&1) || true
[ "${out//$'\n'/ }" = "hi 1" ] || { docker rmi -f "$IMAGE" >/dev/null 2>&1 || true; die "image $IMAGE does not work (bash/tee/python3): $out"; }
squashfs
