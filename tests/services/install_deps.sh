#!/usr/bin/env bash
# install_deps.sh - apt-get install the Debian packages the test services need (Slurm, munge, mariadb,
# slurmdbd, sshd, rsync, docker, debootstrap, chromium, ...), installing only what is missing. Needs root.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# shellcheck source=_lib.sh
source "$HERE/_lib.sh"

# have NAME: NAME is a command on PATH or an executable in an sbin dir (PATH may lack sbin)
have() { command -v "$1" >/dev/null 2>&1 || [ -x "/usr/sbin/$1" ] || [ -x "/sbin/$1" ]; }

missing=()
want() { have "$2" || missing+=("$1"); }   # want PACKAGE COMMAND
want slurmctld slurmctld
want slurmd slurmd
want slurm-client sbatch
want slurm-client sacct
want munge munged
want bc bc
want slurmdbd slurmdbd
want mariadb-server mariadbd
want mariadb-server mariadb-install-db
want openssh-server sshd
want openssh-client ssh-keygen
want rsync rsync
want docker.io dockerd
want debootstrap debootstrap
want git git
want iproute2 ss
want iproute2 ip
want procps pgrep
want procps ps
want chromium chromium   # the browser that tests/test_report.py opens kit report's pages in
want gcc cc             # tests/test_job_outcomes.py compiles its race shim
[ ${#missing[@]} -eq 0 ] && exit 0

need_root
mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
export DEBIAN_FRONTEND=noninteractive
LOG=$(mktemp "${TMPDIR:-/tmp}/kit-install-deps.XXXXXX.log")
APT=(apt-get -o DPkg::Lock::Timeout=600 -o Acquire::Retries=3 -q -y)

update() { "${APT[@]}" update >>"$LOG" 2>&1; }
install() { "${APT[@]}" install --no-install-recommends "${missing[@]}" >>"$LOG" 2>&1; }

# no package lists at all (fresh image, lists wiped) -> update first; otherwise only after a failure
if ! compgen -G '/var/lib/apt/lists/*_Packages*' >/dev/null; then
  update || { tail -n 30 "$LOG" >&2; die "apt-get update failed (full log: $LOG)"; }
fi
if ! install; then
  if ! { update && install; }; then
    tail -n 30 "$LOG" >&2
    die "apt-get install ${missing[*]} failed (full log: $LOG)"
  fi
fi
rm -f "$LOG"

# re-check: every wanted command must now exist
for pkg_cmd in slurmctld:slurmctld slurmd:slurmd slurm-client:sbatch munge:munged bc:bc slurmdbd:slurmdbd \
  mariadb-server:mariadbd openssh-server:sshd rsync:rsync docker.io:dockerd debootstrap:debootstrap git:git \
  iproute2:ss procps:pgrep chromium:chromium; do
  have "${pkg_cmd#*:}" || die "package ${pkg_cmd%%:*} installed but '${pkg_cmd#*:}' is still missing"
done
