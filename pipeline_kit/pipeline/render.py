"""Turns Jobs into the bash scripts that run on the allocation: ports and references resolved, every command
started with its own env and log, services stopped when the other commands end, array units looped or indexed."""

from __future__ import annotations

import os
import shlex
from dataclasses import dataclass

from pipeline_kit.errors import UserError
from pipeline_kit.log_causes import SHELL_FUNCTION
from pipeline_kit.measurements import JOB_START_VAR, SUBMITTED_VAR
from pipeline_kit.pipeline.model import AUTO_PORT, Command, Endpoint, Job
from pipeline_kit.ports import free_port

HET_HOST_VAR = "het_group_host"  # nemo-run's name for the first host of het group N (it does not export it)

# Started once per script. kit_start runs a command in its own session (so its whole tree can be stopped),
# logs it to $KIT_LOG_DIR, and kit_wait applies the service rule: the job ends when its non-service commands
# end (or one fails, or a service dies early); remaining services are then stopped.
# Slurm's early-warning signal (`--signal=USR1@N`, which kit's training jobs ask for) goes to every process of every
# step of the job. kit's shells ignore it and their children inherit that, so it reaches only a program that handles
# it (the trainer saves a checkpoint) and kills nothing else (bash, tee, a server).
PRELUDE = r"""set -o pipefail
trap '' USR1
kit_pids=(); declare -A kit_name=() kit_service=() kit_log_writer=() kit_status_file=(); kit_ticker=; kit_woke=0
kit_start() {  # NAME SERVICE(0|1) COMMAND
  local log="$KIT_LOG_DIR/${KIT_LOG_PREFIX:-}$1.log" fd status
  # the log's writer (tee) is this shell's own child, so kit_wait can let it write a command's last lines before
  # reading the cause from the log; it outlives a stop signal (it ends when the command closes its output), so a
  # stopped command's last lines (a trainer saving) still reach the log instead of dying on a broken pipe
  exec {fd}> >(trap '' INT TERM; exec tee -a "$log")
  local writer=$!
  # the command's own shell writes its exit status to a hidden file beside its log (bash's `wait` has lost one under
  # load); that shell outlives a stop signal until the command ends, so the command's whole tree is stopped and
  # waited for as before
  status="$KIT_LOG_DIR/${KIT_LOG_PREFIX:-}.$1.exit-status"; rm -f "$status"
  setsid -w bash -c 'trap : TERM; bash -c "$1"; r=$?; echo "$r" > "$2.tmp" && mv -f "$2.tmp" "$2"; exit "$r"' \
    kit-command "$3" "$status" >&"$fd" 2>&1 </dev/null {fd}>&- &
  kit_name[$!]=$1; kit_service[$!]=$2; kit_pids+=($!); kit_log_writer[$!]=$writer; kit_status_file[$!]=$status
  exec {fd}>&-
}
kit_free_port() { python3 "$KIT_CODE_DIR/pipeline_kit/ports.py"; }
kit_stop() {
  local p
  for p in "${kit_pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null; done
}
kit_wait() {
  local mains=0 rc=0 p q r cause what=command left=() rest=() me=$BASHPID
  for p in "${kit_pids[@]}"; do [ "${kit_service[$p]}" = 0 ] && mains=$((mains + 1)); done
  # only services (a server's own het component): they run until they end; one that fails is still a service
  [ "$mains" = 0 ] && what=service && mains=${#kit_pids[@]} && for p in "${kit_pids[@]}"; do kit_service[$p]=0; done
  left=("${kit_pids[@]}")
  # bash 5.2's `wait -n` can miss an end for good: woken by one child's end (a log writer's, just before its
  # command's), its SIGCHLD handler may reap the command before it blocks again, for yet another child. So a ticker
  # interrupts it every second (a trapped signal ends `wait`), and kit_wait then looks for ended commands itself.
  trap 'kit_woke=1' WINCH
  (trap - INT TERM WINCH; while sleep 1; do kill -WINCH "$me" 2>/dev/null || exit 0; done) </dev/null >/dev/null 2>&1 &
  kit_ticker=$!
  while [ "$mains" -gt 0 ]; do
    p=; wait -n -p p "${left[@]}"; r=$?
    if [ -z "$p" ]; then
      # the ticker, or "no such job" (bash's answer for a command that has ended and left its job table): take an
      # ended command's status with a plain `wait PID`, never read it as success
      for q in "${left[@]}"; do kill -0 "$q" 2>/dev/null || { p=$q; kit_exit_code "$q"; r=$?; break; }; done
      [ -n "$p" ] || { [ "$r" -gt 128 ] || sleep 0.2; continue; }
    fi
    rest=(); for q in "${left[@]}"; do [ "$q" = "$p" ] || rest+=("$q"); done; left=("${rest[@]}")
    kit_logs_written "$p"
    cause=$(kit_cause "${kit_name[$p]}")
    if [ "${kit_service[$p]}" = 1 ]; then
      kit_note "kit: service '${kit_name[$p]}' exited with code $r before the other commands ended${cause:+$'\n'$cause}"
      rc=$((r ? r : 1)); break
    fi
    mains=$((mains - 1))
    if [ "$r" != 0 ]; then kit_note "kit: $what '${kit_name[$p]}' failed with exit code $r${cause:+$'\n'$cause}"; rc=$r; break; fi
  done
  kit_stop; kit_stop_ticker
  for p in "${kit_pids[@]}"; do kill -0 "$p" 2>/dev/null && wait "$p" 2>/dev/null; done  # a gone one: no `wait` to block
  kit_logs_written "${kit_pids[@]}"
  kit_forget
  return $rc
}
kit_forget() {  # the ended commands' records and status files
  local p; for p in "${kit_pids[@]}"; do rm -f "${kit_status_file[$p]}"; done
  kit_pids=(); kit_name=(); kit_service=(); kit_log_writer=(); kit_status_file=()
}
kit_exit_code() {  # PID of an ended command: its exit code (asked again when the ticker's signal cut `wait` short).
  # bash may have lost it (its `wait PID` then blocks for good; seen twice under load), so a command that is gone
  # answers from the status file its shell wrote; one gone without it (killed before it could write) counts as failed
  # after 10 cuts, never as a success, and the job ends instead of hanging
  local r cuts=0 status=${kit_status_file[$1]}
  while :; do
    if ! kill -0 "$1" 2>/dev/null && [ -s "$status" ]; then r=$(<"$status"); return "$r"; fi
    kit_woke=0; wait "$1"; r=$?
    [ "$kit_woke" = 1 ] || return $r
    if kill -0 "$1" 2>/dev/null; then cuts=0; else cuts=$((cuts + 1)); fi
    [ "$cuts" -lt 10 ] || { kit_note "kit: the exit status of '${kit_name[$1]}' was lost (bash's wait) and it wrote none; counted as failed"; return 1; }
  done
}
kit_stop_ticker() {  # a stray tick after this is ignored (WINCH's default), so it cuts no later `wait` short
  trap - WINCH
  [ -z "$kit_ticker" ] || { kill "$kit_ticker" 2>/dev/null; wait "$kit_ticker" 2>/dev/null; kit_ticker=; }
}
kit_logs_written() {  # PID...: let the log writers of these commands write their last lines (at most 10 s in all: a
  # process a command left behind may still hold its output)
  local p i
  for ((i = 0; i < 100; i++)); do
    for p in "$@"; do kill -0 "${kit_log_writer[$p]}" 2>/dev/null && break; p=; done
    [ -z "$p" ] && return 0
    sleep 0.1
  done
}
kit_note() {  # a line from kit itself, on stderr and in the job's kit.log (which `kit logs` shows); an array's units
  # share that log, so each of their lines starts with "[unit N] " (KIT_UNIT_NOTE)
  { mkdir -p "$KIT_LOG_DIR/$KIT_JOB" && echo "$1" | sed "s/^/${KIT_UNIT_NOTE:-}/" | tee -a "$KIT_LOG_DIR/$KIT_JOB/kit.log"; } >&2
}
kit_record() {  # on none/local, the job's outcome for `kit status`: an exit code or CANCELLED
  [ -z "${KIT_RC_FILE:-}" ] || { echo "$1" > "$KIT_RC_FILE.tmp" && mv -f "$KIT_RC_FILE.tmp" "$KIT_RC_FILE"; }
}
kit_cancel() {  # a cancelled job stops what it started (and on none/local records that it was cancelled)
  kit_stop; kit_stop_ticker; kit_reap; kit_forget; kit_record CANCELLED
  exit "$1"
}
kit_reap() {  # give the stopped commands KIT_STOP_GRACE seconds [30] to end (a trainer saves), then kill the rest
  local deadline=$((SECONDS + ${KIT_STOP_GRACE:-30})) p alive
  while :; do
    alive=0; for p in "${kit_pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
    [ "$alive" = 0 ] || [ "$SECONDS" -ge "$deadline" ] && break
    sleep 0.2
  done
  for p in "${kit_pids[@]}"; do kill -KILL -- "-$p" 2>/dev/null; done
}
trap 'kit_cancel 143' TERM; trap 'kit_cancel 130' INT
kit_need_python() {  # PYTHON WHAT FIX MODULE...: end the job (exit 2) unless PYTHON exists and finds every MODULE
  local py=$1 what=$2 fix=$3 missing; shift 3
  if ! command -v "$py" >/dev/null 2>&1; then missing="does not exist"
  elif ! missing=$("$py" -c 'import sys, importlib.util as u; print(*(m for m in sys.argv[1:] if u.find_spec(m) is None))' "$@" 2>/dev/null); then missing="does not run"
  elif [ -n "$missing" ]; then missing="cannot import $missing"
  else return 0; fi
  kit_note "kit: job '$KIT_JOB' cannot start: $what $py $missing; $fix"; kit_record 2; exit 2
}"""
PRELUDE += "\n" + SHELL_FUNCTION


@dataclass(frozen=True)
class ScriptContext:
    """What a script needs to know about where it runs."""

    executor: str  # none | local | slurm
    expname: str
    code_dir: str
    log_dir: str
    # when kit submitted the job (epoch seconds; None in a dry run, whose text stays the same from run to run): the
    # job's queue wait in its measurements (pipeline_kit.measurements) is from this to its start
    submitted_at: float | None = None


def resolve_ports(jobs: list[Job], exclusive_base: int = 5000) -> dict[int, int]:
    """A port for every command that asks for one, keyed by id(command): a fixed number stays, `auto`
    is a free port on this host (or 5000+i when the allocation is exclusive, so nothing else can take it)."""
    ports: dict[int, int] = {}
    for job in jobs:
        for group in job.groups:
            for i, command in enumerate(group.commands):
                if command.port == AUTO_PORT:
                    ports[id(command)] = exclusive_base + i if group.hardware.exclusive else free_port()
                elif command.port is not None:
                    ports[id(command)] = int(command.port)
    return ports


def runtime_port(command: Command, job: Job, ctx: ScriptContext) -> str | None:
    """The shell variable holding an `auto` port picked where the job runs: the elements of a Slurm array share
    nodes, so one port fixed at submission would clash (an exclusive allocation keeps its fixed 5000+i)."""
    group = next(g for g in job.groups if any(c is command for c in g.commands))
    if ctx.executor == "slurm" and job.array_size and command.port == AUTO_PORT and not group.hardware.exclusive:
        return f"KIT_PORT_{command.name.replace('-', '_').replace('.', '_')}"
    return None


def _port(command: Command, job: Job, ctx: ScriptContext, ports: dict[int, int]) -> int | str:
    var = runtime_port(command, job, ctx)
    return f"${{{var}}}" if var else ports[id(command)]


def endpoints(command: Command, job: Job, ctx: ScriptContext, ports: dict[int, int]) -> dict[str, Endpoint]:
    """The resolved `refs` of a command: same group or not on Slurm → 127.0.0.1 or the other group's first host."""
    group_of = {id(c): gi for gi, g in enumerate(job.groups) for c in g.commands}
    mine = group_of[id(command)]
    out = {}
    for ref_name, target in command.refs.items():
        if id(target) not in group_of:
            raise UserError(
                f"job '{job.name}': command '{command.name}' refers to '{target.name}', which is not in the same job; "
                "references work within one job only."
            )
        theirs = group_of[id(target)]
        host = f"${{{HET_HOST_VAR}_{theirs}}}" if ctx.executor == "slurm" and theirs != mine else "127.0.0.1"
        out[ref_name] = Endpoint(host=host, port=_port(target, job, ctx, ports))
    return out


def command_text(command: Command, job: Job, ctx: ScriptContext, ports: dict[int, int]) -> str:
    refs = endpoints(command, job, ctx, ports)
    text = command.command if isinstance(command.command, str) else command.command(refs)
    if not isinstance(text, str) or not text.strip():
        raise UserError(f"job '{job.name}': command '{command.name}' built an empty command; check its builder.")
    exports = [f"export {k}={shlex.quote(str(v))}" for k, v in command.env.items()]
    if id(command) in ports:
        exports.append(f"export KIT_PORT={_port(command, job, ctx, ports)}")
    return "\n".join([*exports, text])


def _header(job: Job, ctx: ScriptContext) -> list[str]:
    return [
        "#!/bin/bash",
        f"# kit job '{job.name}' of experiment '{ctx.expname}'",
        PRELUDE,
        f"export KIT_EXPNAME={shlex.quote(ctx.expname)} KIT_JOB={shlex.quote(job.name)}",
        f"export KIT_CODE_DIR={shlex.quote(ctx.code_dir)} KIT_LOG_DIR={shlex.quote(ctx.log_dir)}",
        'export PYTHONPATH="$KIT_CODE_DIR${PYTHONPATH:+:$PYTHONPATH}"',
        'mkdir -p "$KIT_LOG_DIR" && cd "$KIT_CODE_DIR" || exit 1',
        *([f"export {SUBMITTED_VAR}={ctx.submitted_at:.3f}"] if ctx.submitted_at is not None else []),
    ]


def _start_lines(job: Job, group_indices: list[int], ctx: ScriptContext, ports: dict[int, int]) -> list[str]:
    lines = []
    for gi in group_indices:
        for command in job.groups[gi].commands:
            var = runtime_port(command, job, ctx)
            if var:
                lines.append(f"export {var}=$(kit_free_port)")
    for gi in group_indices:
        for command in job.groups[gi].commands:
            text = command_text(command, job, ctx, ports)
            lines.append(f"kit_start {command.name} {int(command.service)} {shlex.quote(text)}")
    return lines


def _unit_runner(job: Job, starts: list[str], guard: list[str] = ()) -> list[str]:
    """`kit_unit`: run one unit (all commands, service rule) and leave its exit code in the unit's .rc file;
    `guard` lines (a function body) may refuse the unit before anything starts, by returning non-zero."""
    # each job logs into its own folder (job and command names may both hold '-', so a flat prefix is ambiguous)
    prefix = f"{job.name}/unit$KIT_UNIT-" if job.array_size else f"{job.name}/"
    rc_file = f'"$KIT_LOG_DIR/{job.name}.units/$KIT_UNIT.rc"' if job.array_size else ""
    record = (
        [f'  mkdir -p "$KIT_LOG_DIR/{job.name}.units"', f"  echo $rc > {rc_file}.tmp && mv -f {rc_file}.tmp {rc_file}"]
        if rc_file
        else []
    )
    lines = []
    if guard:
        lines += ["kit_unit_guard() {", *guard, "}"]
    lines += [
        "kit_unit() {",
        f"  export {JOB_START_VAR}=$(date +%s.%N)",  # the unit's start: its server's start-up is measured from it
        f'  export KIT_LOG_PREFIX="{prefix}"',
        *(['  export KIT_UNIT_NOTE="[unit $KIT_UNIT] "'] if job.array_size else []),
        f'  mkdir -p "$KIT_LOG_DIR/{job.name}"',
    ]
    if guard:
        lines += ["  local rc=0; kit_unit_guard || rc=$?", '  if [ "$rc" != 0 ]; then', *record, "  return $rc; fi"]
    lines += [f"  {s}" for s in starts]
    lines += ["  kit_wait; local rc=$?", *record, "  return $rc", "}"]
    return lines


def _python_checks(commands: list[Command]) -> list[str]:
    """The interpreters of `commands` that carry a PythonCheck, each checked once, before anything starts."""
    lines = []
    for command in commands:
        check = command.python_check
        if check is not None:
            words = [check.python, shlex.quote(check.what), shlex.quote(check.fix), *map(shlex.quote, check.modules)]
            lines.append(f"kit_need_python {' '.join(words)}")
    return list(dict.fromkeys(lines))


def _input_checks(job: Job, writers: dict[str, str]) -> list[str]:
    """Every input must exist when the job starts; one that an earlier job should have written names that job."""
    lines = []
    for path in job.inputs:
        made_by = f" ({writers[path]} should have written it: see its log)" if path in writers else ""
        hint = f"; {job.input_hints[path]}" if path in job.input_hints and not made_by else ""
        message = f"kit: job '{job.name}' cannot start: its input {path} does not exist{made_by}{hint}"
        lines.append(f"[ -e {shlex.quote(path)} ] || {{ kit_note {shlex.quote(message)}; kit_record 2; exit 2; }}")
    return lines


def check_lines(checks: list[str], refuse: str) -> list[str]:
    """A job's `checks`, each refusing the job (`refuse`: shell that records the outcome and exits, with the
    check's output in $kit_why) when it exits 2."""
    return [f"kit_why=$({{ {check}\n}} 2>&1) || {{ [ $? != 2 ] || {{ {refuse}; }}; }}" for check in checks]


def slurm_group_script(
    job: Job,
    group_index: int,
    ctx: ScriptContext,
    ports: dict[int, int],
    input_writers: dict[str, str] | None = None,
    unit_offset: int = 0,
) -> str:
    """The script srun runs for one group of a Slurm job; an array element takes its unit from SLURM_ARRAY_TASK_ID
    (plus `unit_offset` when the job's units were split over several arrays)."""
    lines = _header(job, ctx)
    lines += _python_checks(job.groups[group_index].commands)
    if any(not c.service for c in job.groups[group_index].commands):  # services (a server) do not read inputs
        lines += _input_checks(job, input_writers or {})
    lines += _unit_runner(job, _start_lines(job, [group_index], ctx, ports))
    unit = f"$((${{SLURM_ARRAY_TASK_ID:-0}} + {unit_offset}))" if unit_offset else "${SLURM_ARRAY_TASK_ID:-0}"
    lines += [f"export KIT_UNIT={unit}", "kit_unit"]
    return "\n".join(lines) + "\n"


CANCELLED_RC = "CANCELLED"  # what a job's .rc file holds when an afterok dependency failed and it did not run


def _dependency_guard(job: Job, after_rc_files: list[str], dependency_type: str) -> list[str]:
    """Slurm's dependency rules for none/local (nemo-run's local runner starts dependents whatever the parents'
    outcome): wait for every parent's .rc file, then afterany runs; afterok runs only if every parent succeeded,
    afternotok only if one did not; otherwise the job is CANCELLED. aftercorr is applied per unit (below)."""
    if not after_rc_files:
        return []
    files = " ".join(shlex.quote(f) for f in after_rc_files)
    lines = [f'for f in {files}; do while [ ! -e "$f" ]; do sleep 1; done; done']
    if dependency_type == "afterany" and job.skip_when_parents_failed:
        parents = ", ".join(sorted({os.path.basename(f).removesuffix(".rc") for f in after_rc_files}))
        lines.append(f'kit_ok_parents=0; for f in {files}; do [ "$(cat "$f")" = 0 ] && kit_ok_parents=1; done')
        lines.append(
            f'[ "$kit_ok_parents" = 1 ] || {{ kit_note "kit: job \'{job.name}\' skipped: {parents} failed"; '
            f"kit_record {CANCELLED_RC}; exit 1; }}"
        )
    if dependency_type in ("afterok", "afternotok"):
        cancel = f"kit_record {CANCELLED_RC}; exit 1"
        lines.append(f'kit_failed_parents=0; for f in {files}; do [ "$(cat "$f")" = 0 ] || kit_failed_parents=1; done')
        if dependency_type == "afterok":
            lines.append(
                f'[ "$kit_failed_parents" = 0 ] || {{ kit_note "kit: job \'{job.name}\' not run: an afterok '
                f'dependency did not succeed"; {cancel}; }}'
            )
        else:
            lines.append(
                f'[ "$kit_failed_parents" = 1 ] || {{ kit_note "kit: job \'{job.name}\' not run: every afternotok '
                f'dependency succeeded"; {cancel}; }}'
            )
    return lines


def _corresponding_unit_guard(after_rc_files: list[str]) -> list[str]:
    """aftercorr: unit N runs only if unit N of every parent succeeded (a parent that is not an array: the whole
    parent). Emitted inside kit_unit, before the commands start."""
    lines = []
    for f in after_rc_files:
        unit_rc = f"{f.removesuffix('.rc')}.units/$KIT_UNIT.rc"
        lines.append(
            f'  if [ -d {shlex.quote(f.removesuffix(".rc") + ".units")} ]; then kit_parent="{unit_rc}"; '
            f"else kit_parent={shlex.quote(f)}; fi"
        )
        lines.append(
            '  [ "$(cat "$kit_parent" 2>/dev/null)" = 0 ] || { kit_note "kit: unit $KIT_UNIT not run: aftercorr '
            'parent $kit_parent did not succeed"; return 1; }'
        )
    return lines


def local_job_script(
    job: Job,
    ctx: ScriptContext,
    ports: dict[int, int],
    after_rc_files: list[str] = (),
    dependency_type: str = "afterany",
    input_writers: dict[str, str] | None = None,
) -> str:
    """The script for `none`/`local`: every group of the job runs at once on this host; array units run in turn.
    `after_rc_files` are the .rc files of the jobs it depends on (this pipeline's and earlier experiments')."""
    lines = _header(job, ctx)
    lines.append(f'export KIT_RC_FILE="$KIT_LOG_DIR/{job.name}.rc"')
    if ctx.executor == "none":  # `kit cancel` signals this script, whose trap stops what it started
        lines.append(f'echo $$ > "$KIT_LOG_DIR/{job.name}.pid"')
    lines += _dependency_guard(job, list(after_rc_files), dependency_type)
    lines += _python_checks(job.commands)
    lines += _input_checks(job, input_writers or {})
    lines += check_lines(job.checks, 'kit_note "$kit_why"; kit_record 2; exit 2')
    guard = _corresponding_unit_guard(list(after_rc_files)) if dependency_type == "aftercorr" else []
    lines += _unit_runner(job, _start_lines(job, list(range(len(job.groups))), ctx, ports), guard)
    if job.array_size:
        lines += [
            "failed=0",
            f"for KIT_UNIT in $(seq 0 {job.array_size - 1}); do",
            "  export KIT_UNIT",
            "  kit_unit || failed=$((failed + 1))",
            "done",
            f'[ "$failed" = 0 ] || echo "kit: $failed of {job.array_size} units failed" >&2',
            "rc=$((failed ? 1 : 0))",
        ]
    else:
        lines += ["export KIT_UNIT=0", "kit_unit; rc=$?"]
    # the job's outcome, read by `kit status` (nemo-run's local status can lag behind)
    lines += ['echo $rc > "$KIT_RC_FILE.tmp" && mv -f "$KIT_RC_FILE.tmp" "$KIT_RC_FILE"', "exit $rc"]
    return "\n".join(lines) + "\n"
