#!/usr/bin/env bash
# down.sh [DIR] - stop every service that up.sh started in DIR [${KIT_TEST_SERVICES:-/tmp/kit-services}]
# (Slurm cluster and private dockerd, in parallel). Keeps the docker data root (images) and the image cache.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=_lib.sh
source "$HERE/_lib.sh"

[ $# -le 1 ] || die "usage: $0 [DIR]"
DIR=$(readlink -m "${1:-${KIT_TEST_SERVICES:-/tmp/kit-services}}")
[ -d "$DIR" ] || exit 0
exec 9>"$DIR/.lock"
flock -w 900 9 || die "timed out waiting for the lock $DIR/.lock"

"$HERE/slurm_down.sh" "$DIR/slurm" 9>&- & spid=$!
drc=0; "$HERE/docker_down.sh" "$DIR/docker" 9>&- || drc=$?
src=0; wait "$spid" || src=$?
rm -f "$DIR/services.env"
[ "$src" = 0 ] && [ "$drc" = 0 ] || die "stopping failed (slurm_down exit $src, docker_down exit $drc)"
