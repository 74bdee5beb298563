"""The declarative layer every `kit` command builds on: Pipeline → Job → CommandGroup → Command (+ HardwareConfig).

`Pipeline.run()` packages the code once and launches the jobs through nemo-run on the cluster's executor.
"""

from pipeline_kit.pipeline.model import (
    AUTO_PORT,
    Command,
    CommandGroup,
    Endpoint,
    HardwareConfig,
    Job,
)
from pipeline_kit.pipeline.runner import Pipeline, RunResult

__all__ = [
    "AUTO_PORT",
    "Command",
    "CommandGroup",
    "Endpoint",
    "HardwareConfig",
    "Job",
    "Pipeline",
    "RunResult",
]
