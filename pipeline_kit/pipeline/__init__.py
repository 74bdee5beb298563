"""The declarative layer every `kit` command builds on: Pipeline → Job → CommandGroup → Command (+ HardwareConfig).

These are data; `pipeline_kit.launch.run_pipeline` packs the code once and submits them through nemo-run.
"""

from pipeline_kit.pipeline.model import (
    AUTO_PORT,
    Command,
    CommandGroup,
    Endpoint,
    HardwareConfig,
    Job,
    PythonCheck,
)
from pipeline_kit.pipeline.pipeline import Pipeline

__all__ = [
    "AUTO_PORT",
    "Command",
    "CommandGroup",
    "Endpoint",
    "HardwareConfig",
    "Job",
    "Pipeline",
    "PythonCheck",
]
