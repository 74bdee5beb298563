#!/usr/bin/env bash
# slurm_down.sh DIR - stop the private Slurm cluster that slurm_up.sh started in DIR, by pid file only:
# cancel all jobs, then TERM (KILL after 10 s) in parallel waves: slurmd+slurmctld+sshd, then slurmdbd+mariadb+munged.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=_lib.sh
source "$HERE/_lib.sh"

[ $# -eq 1 ] || die "usage: $0 DIR"
DIR=$(readlink -m "$1")
[ -d "$DIR" ] || exit 0
export PATH=$PATH:/usr/sbin:/sbin
export SLURM_CONF=$DIR/etc/slurm.conf
RUN=$(readlink -m "$DIR/run")

# cancel every job first: their slurmstepd processes would outlive slurmd otherwise
if pid_alive "$RUN/slurmctld.pid" slurmctld >/dev/null && [ -f "$SLURM_CONF" ]; then
  jobs=$(timeout 10 squeue -h -o %i 2>/dev/null | sort -u | tr '\n' ' ') || jobs=
  if [ -n "${jobs// /}" ]; then
    # shellcheck disable=SC2086
    timeout 10 scancel --quiet $jobs 2>/dev/null || true
    for ((i = 0; i < 100; i++)); do
      [ -z "$(timeout 5 squeue -h -t R,CG,S,CF,PD -o %i 2>/dev/null)" ] && break
      sleep 0.1
    done
  fi
fi

shopt -s nullglob
wave1="$RUN/slurmctld.pid:slurmctld $RUN/sshd.pid:sshd"
for f in "$RUN"/slurmd-*.pid; do wave1+=" $f:slurmd"; done
wave2="$RUN/slurmdbd.pid:slurmdbd $RUN/mariadb.pid:mariadbd $RUN/munged.pid:munged"
stop_waves "$wave1" "$wave2"

# drop the /etc/slurm/slurm.conf link if it points at this cluster
if [ -L /etc/slurm/slurm.conf ] && [ "$(readlink /etc/slurm/slurm.conf)" = "$SLURM_CONF" ]; then
  rm -f /etc/slurm/slurm.conf
fi

# anything of ours still alive? (slurmdbd has no DIR on its command line; it is covered by its pid file above)
stray=$(pgrep -af -- "$DIR" 2>/dev/null | grep -E '^[0-9]+ (munged|slurm[a-z]*|mariadbd|sshd:?|/usr/sbin/(sshd|munged|slurm[a-z]*|mariadbd)) ' || true)
[ -z "$stray" ] || die "processes of $DIR still running after stop:
$stray"
