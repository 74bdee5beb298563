#!/usr/bin/env bash
# docker_up.sh DIR - start a private dockerd (own data root, exec root, socket; overlay2; no iptables/bridge)
# rooted in DIR and wait until it answers. Idempotent. Writes DIR/env.sh (DOCKER_HOST). Needs root.
#   START_TIMEOUT [60] seconds to wait for `docker version`
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=_lib.sh
source "$HERE/_lib.sh"

[ $# -eq 1 ] || die "usage: $0 DIR"
DIR=$(readlink -m "$1")
case $DIR in *[[:space:]:]*) die "DIR must not contain whitespace or ':' ($DIR)";; esac
need_root
export PATH=$PATH:/usr/sbin:/sbin
command -v dockerd >/dev/null || die "dockerd not found; run $HERE/install_deps.sh first"
command -v docker >/dev/null || die "docker CLI not found; run $HERE/install_deps.sh first"
START_TIMEOUT=${START_TIMEOUT:-60}

mkdir -p "$DIR/data"
# containerd/runc put sockets under the exec root (unix socket paths max 107 bytes): keep it short
EXEC=$(short_dir "$DIR/exec" kit-dx 32)
SOCK=$(short_dir "$DIR/docker.sock" kit-dx-sock 80)
[ "$SOCK" = "$DIR/docker.sock" ] || SOCK=$SOCK.sock
PIDFILE=$DIR/dockerd.pid
export DOCKER_HOST=unix://$SOCK
echo "export DOCKER_HOST=$DOCKER_HOST" >"$DIR/env.sh.new" && mv -f "$DIR/env.sh.new" "$DIR/env.sh"
answers() { timeout 10 docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

if pid_alive "$PIDFILE" dockerd >/dev/null; then
  answers && exit 0
  "$HERE/docker_down.sh" "$DIR" || die "could not stop the unresponsive dockerd of $DIR"
fi
rm -f "$PIDFILE" "$SOCK"
mkdir -p "$EXEC"
# a containerd of an earlier boot leaves its pid file; dockerd trusts it when that pid was reused (after a reboot)
# and then waits for a containerd that does not exist
pid_alive "$EXEC/containerd/containerd.pid" containerd >/dev/null || rm -f "$EXEC/containerd/containerd.pid"
[ "$EXEC" = "$DIR/exec" ] || ln -sfn "$EXEC" "$DIR/exec"   # so DIR shows where the exec root is

setsid dockerd --data-root "$DIR/data" --exec-root "$EXEC" --pidfile "$PIDFILE" -H "unix://$SOCK" \
  --storage-driver overlay2 --iptables=false --ip-masq=false --bridge=none \
  </dev/null >>"$DIR/dockerd.log" 2>&1 &
pid=$!
for ((i = 0; i < START_TIMEOUT * 10; i++)); do
  answers && exit 0
  kill -0 "$pid" 2>/dev/null || break
  sleep 0.1
done
echo "---- last lines of $DIR/dockerd.log:" >&2
tail -n 20 "$DIR/dockerd.log" >&2
kill -0 "$pid" 2>/dev/null && { kill -TERM "$pid" 2>/dev/null || true; }
die "dockerd did not answer on $DOCKER_HOST within ${START_TIMEOUT}s"
