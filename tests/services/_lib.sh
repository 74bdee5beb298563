# shellcheck shell=bash
# _lib.sh - helpers shared by the tests/services/*.sh scripts (sourced, not executed).
# Provides: die, note, now, elapsed, need_root, pid_alive, short_dir, port_busy, stop_waves.

now() { date +%s%N; }
KIT_T0=$(now)

die() { echo "ERROR [$(basename "$0")]: $*" >&2; exit 1; }

# note MSG: progress line on stderr, only when VERBOSE=1
note() { [ "${VERBOSE:-0}" = 1 ] && echo "[$(basename "$0") $(elapsed)s] $*" >&2; return 0; }

# elapsed [T0]: seconds since T0 (a `now` value; default: when this lib was sourced), 2 decimals
elapsed() { local ms=$((($(now) - ${1:-$KIT_T0}) / 10000000)); printf '%d.%02d' $((ms / 100)) $((ms % 100)); }

need_root() { [ "$(id -u)" = 0 ] || die "must run as root (uid 0); got uid $(id -u)"; }

# pid_alive PIDFILE NAME: prints the pid and succeeds if PIDFILE names a live process whose
# command name is NAME (guards against a stale pid file pointing at a recycled pid).
pid_alive() {
  local f=$1 name=$2 pid comm
  [ -s "$f" ] || return 1
  pid=$(tr -dc '0-9' <"$f" 2>/dev/null) || return 1
  [ -n "$pid" ] && [ -r "/proc/$pid/comm" ] || return 1
  comm=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
  # /proc/PID/comm is truncated to 15 characters
  [ "$comm" = "${name:0:15}" ] || return 1
  # a zombie is not alive
  [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ] || return 1
  echo "$pid"
}

# short_dir LONG_PATH PREFIX MAXLEN: echo LONG_PATH if it is at most MAXLEN characters,
# otherwise /tmp/PREFIX-<8 hex chars of sha1(LONG_PATH)> (unix socket paths are limited to 107 bytes).
short_dir() {
  if [ "${#1}" -le "$3" ]; then echo "$1"; else echo "/tmp/$2-$(printf '%s' "$1" | sha1sum | cut -c1-8)"; fi
}

# port_busy PORT: succeeds if something listens on TCP PORT (any address)
port_busy() { [ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]; }

# stop_waves "PIDFILE:NAME ..." ["PIDFILE:NAME ..."]...: each argument is one wave. Every process of a
# wave gets SIGTERM at once; stragglers get SIGKILL after STOP_TIMEOUT (10) seconds. Pid files are removed.
stop_waves() {
  local wave item f name pid pids left i
  for wave in "$@"; do
    pids=()
    for item in $wave; do
      f=${item%:*}; name=${item##*:}
      if pid=$(pid_alive "$f" "$name"); then pids+=("$pid"); fi
    done
    if [ ${#pids[@]} -gt 0 ]; then
      kill -TERM "${pids[@]}" 2>/dev/null || true
      for ((i = 0; i < ${STOP_TIMEOUT:-10} * 10; i++)); do
        left=()
        for pid in "${pids[@]}"; do
          [ -d "/proc/$pid" ] && [ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" != Z ] && left+=("$pid")
        done
        [ ${#left[@]} -eq 0 ] && break
        sleep 0.1
      done
      if [ ${#left[@]} -gt 0 ]; then
        echo "WARNING [$(basename "$0")]: SIGKILL after ${STOP_TIMEOUT:-10}s: ${left[*]}" >&2
        kill -KILL "${left[@]}" 2>/dev/null || true
        sleep 0.2
      fi
    fi
    for item in $wave; do rm -f "${item%:*}"; done
  done
}
