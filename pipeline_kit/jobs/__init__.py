"""Job builders: a command's spec + `JobOptions` → Jobs of the declarative layer (no typer here). The CLI only parses
flags into specs; a script can put the same jobs into a bigger Pipeline (generate, run_cmd, server, sandbox)."""

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
