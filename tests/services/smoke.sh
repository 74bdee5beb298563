#!/usr/bin/env bash
# smoke.sh [DIR] - check that the services started by up.sh in DIR really work: plain job + sacct, a GPU het
# job whose components talk TCP by node hostname, afterok-on-failure cancelled, ssh/rsync to the sshd, docker run.
# shellcheck disable=SC2015  # ok() never fails, so A && ok || bad is safe here
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=_lib.sh
source "$HERE/_lib.sh"

DIR=$(readlink -m "${1:-${KIT_TEST_SERVICES:-/tmp/kit-services}}")
[ -f "$DIR/services.env" ] || die "$DIR/services.env not found; run $HERE/up.sh $DIR first"
# shellcheck source=/dev/null
source "$DIR/services.env"
W=$(mktemp -d "${TMPDIR:-/tmp}/kit-smoke.XXXXXX")
trap 'rm -rf "$W"' EXIT
cd "$W"
fail=0
ok() { echo "ok   $*"; }
bad() { echo "FAIL $*"; fail=1; }
# wait_done JOBID...: wait (60 s max) until no listed job is pending/running
wait_done() {
  local i ids; ids=$(IFS=,; echo "$*")
  for ((i = 0; i < 600; i++)); do
    [ -z "$(squeue -h -j "$ids" -t PD,R,CG,CF,S -o %i 2>/dev/null)" ] && return 0
    sleep 0.1
  done
  return 1
}
# sacct_state JOBID: the allocation's state once accounting has it (waits up to 10 s)
sacct_state() {
  local i st
  for ((i = 0; i < 100; i++)); do
    st=$(sacct -n -X -P -j "$1" -o State 2>/dev/null | head -n1 | cut -d' ' -f1)
    case $st in COMPLETED | FAILED | CANCELLED | TIMEOUT | OUT_OF_MEMORY | NODE_FAIL) echo "$st"; return 0 ;; esac
    sleep 0.1
  done
  echo "${st:-none}"
}

# (a) plain job, accounted
J=$(sbatch --parsable -o plain-%j.out --wrap hostname)
wait_done "$J"
st=$(sacct_state "$J")
[ "$st" = COMPLETED ] && [ -s "plain-$J.out" ] && ok "sbatch --wrap hostname: job $J $st ($(cat "plain-$J.out"))" ||
  bad "plain job $J: sacct=$st out=$(cat "plain-$J.out" 2>&1)"

# (b) het job: component 0 (2 fake GPUs) serves HTTP, component 1 connects to it by node hostname
cat >het.sbatch <<'EOF'
#!/bin/bash
#SBATCH -o het-%j.out
#SBATCH --ntasks=1 --gres=gpu:2
#SBATCH hetjob
#SBATCH --ntasks=1
HOST0=$(scontrol show hostnames "$SLURM_JOB_NODELIST_HET_GROUP_0" | head -n1)
echo "nodes: g0=$SLURM_JOB_NODELIST_HET_GROUP_0 g1=$SLURM_JOB_NODELIST_HET_GROUP_1 host0=$HOST0"
srun --het-group=0 bash -c 'echo "server on $SLURMD_NODENAME CUDA=$CUDA_VISIBLE_DEVICES"; exec timeout 8 python3 -m http.server 18555 >/dev/null 2>&1' &
srun --het-group=1 --export=ALL,HOST0=$HOST0 python3 -c '
import os, time, urllib.request
url = "http://%s:18555/" % os.environ["HOST0"]
for _ in range(50):
    try:
        r = urllib.request.urlopen(url, timeout=2)
        print("client on", os.environ["SLURMD_NODENAME"], "got HTTP", r.status, "from", url); break
    except OSError:
        time.sleep(0.1)
else:
    raise SystemExit("client could not reach " + url)
'
rc=$?
wait
exit $rc
EOF
J=$(sbatch --parsable het.sbatch)
wait_done "$J"
st=$(sacct_state "$J")
if [ "$st" = COMPLETED ] && grep -q 'got HTTP 200' "het-$J.out" && grep -q 'CUDA=0,1' "het-$J.out"; then
  ok "het job $J $st: $(grep -h -e '^nodes' -e '^server' -e '^client' "het-$J.out" | paste -sd ';')"
else
  bad "het job $J: sacct=$st; $(cat "het-$J.out" 2>&1)"
fi

# (c) afterok dependent of a failing job is cancelled, not left pending
F=$(sbatch --parsable -o /dev/null --wrap 'exit 3')
D=$(sbatch --parsable -o /dev/null --dependency=afterok:"$F" --wrap 'echo should not run')
wait_done "$F" "$D" || true
stf=$(sacct_state "$F"); std=$(sacct_state "$D")
[ "$stf" = FAILED ] && [ "$std" = CANCELLED ] && ok "afterok on failed job $F ($stf) -> dependent $D $std" ||
  bad "afterok on failure: parent $F=$stf dependent $D=$std ($(squeue -h -j "$D" -o '%T %r' 2>&1))"

# (d) ssh + rsync to the loopback sshd
if [ -n "${KIT_TEST_SSH_CONFIG:-}" ]; then
  SSH=(ssh -F "$KIT_TEST_SSH_CONFIG" -p "$KIT_TEST_SSH_PORT")
  out=$("${SSH[@]}" root@127.0.0.1 sbatch --parsable -o "$W/ssh-%j.out" --wrap hostname 2>&1) &&
    J=$out && wait_done "$J" && [ "$(sacct_state "$J")" = COMPLETED ] &&
    ok "ssh root@127.0.0.1 sbatch: job $J COMPLETED" || bad "ssh sbatch: $out"
  out=$(ssh -p "$KIT_TEST_SSH_PORT" -i "$KIT_TEST_SSH_KEY" -o BatchMode=yes root@127.0.0.1 sacct -n -X -j 1 -o State 2>&1) &&
    ok "plain ssh -i KEY root@127.0.0.1 sacct: ${out//$'\n'/ }" || bad "plain ssh sacct: $out"
  mkdir -p src && echo payload >src/f.txt
  rsync -a -e "ssh -F $KIT_TEST_SSH_CONFIG -p $KIT_TEST_SSH_PORT" src/ "root@127.0.0.1:$W/dst/" 2>rsync.err &&
    [ "$(cat dst/f.txt 2>/dev/null)" = payload ] && ok "rsync over ssh" || bad "rsync: $(cat rsync.err)"
fi

# (e) docker
if [ -n "${DOCKER_HOST:-}" ]; then
  out=$(docker run --rm kit-test-base:latest bash -c 'echo hi | tee /dev/null; python3 -c "print(1)"' 2>&1) &&
    [ "${out//$'\n'/ }" = "hi 1" ] && ok "docker run kit-test-base:latest -> ${out//$'\n'/ }" || bad "docker run: $out"
fi

[ $fail = 0 ] || die "smoke checks failed"
