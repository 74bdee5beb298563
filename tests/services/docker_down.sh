#!/usr/bin/env bash
# docker_down.sh DIR - stop the private dockerd that docker_up.sh started in DIR: remove running containers,
# TERM dockerd by pid file (KILL after 10 s), then clean up its containerd and any mounts left behind.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=_lib.sh
source "$HERE/_lib.sh"

[ $# -eq 1 ] || die "usage: $0 DIR"
DIR=$(readlink -m "$1")
[ -d "$DIR" ] || exit 0
export PATH=$PATH:/usr/sbin:/sbin
EXEC=$(readlink -m "$DIR/exec")
PIDFILE=$DIR/dockerd.pid

if pid=$(pid_alive "$PIDFILE" dockerd); then
  if [ -f "$DIR/env.sh" ]; then
    # shellcheck source=/dev/null
    source "$DIR/env.sh"
    ids=$(timeout 10 docker ps -q 2>/dev/null || true)
    # shellcheck disable=SC2086
    [ -z "$ids" ] || timeout 30 docker rm -f $ids >/dev/null 2>&1 || true
  fi
  stop_waves "$PIDFILE:dockerd"
fi
rm -f "$PIDFILE"

# a KILLed dockerd leaves its containerd (and shims) behind: they carry the exec root on their command line
leftover=$(pgrep -f -- "$EXEC/" 2>/dev/null | tr '\n' ' ' || true)
if [ -n "${leftover// /}" ]; then
  # shellcheck disable=SC2086
  kill -TERM $leftover 2>/dev/null || true
  sleep 2
  # shellcheck disable=SC2086
  kill -KILL $leftover 2>/dev/null || true
fi
# unmount anything still mounted below the data or exec root (overlay layers, netns, shm)
{ awk '{print $2}' /proc/mounts | grep -E "^($DIR|$EXEC)/" || true; } | sort -r | while read -r m; do
  umount -l "$m" 2>/dev/null || true
done

stray=$(pgrep -af -- "$DIR" 2>/dev/null | grep -E '^[0-9]+ [^ ]*(dockerd|containerd)' || true)
[ -z "$stray" ] || die "processes of $DIR still running after stop:
$stray"
