"""Job builders: each command's spec → Jobs of the declarative layer, importable from Python (no typer here).

`generate_jobs`, `run_cmd_jobs`, `server_jobs`, `sandbox_jobs` take a cluster, a spec and `JobOptions`; the CLI
only parses flags into those and runs the Pipeline; a script can put the same jobs into a bigger Pipeline."""

from pipeline_kit.jobs.generate import GenerateSpec, UnitPlan, generate_jobs, plan_generation
from pipeline_kit.jobs.options import JobOptions, JobPlan, chain
from pipeline_kit.jobs.run_cmd import RunCmdSpec, run_cmd_jobs
from pipeline_kit.jobs.services import sandbox_jobs, server_jobs

__all__ = [
    "GenerateSpec",
    "JobOptions",
    "JobPlan",
    "RunCmdSpec",
    "UnitPlan",
    "chain",
    "generate_jobs",
    "plan_generation",
    "run_cmd_jobs",
    "sandbox_jobs",
    "server_jobs",
]
