"""pipeline_kit: the `kit` CLI and the declarative job layer under it.

Subpackages: `cluster` (cluster configs), `pipeline` (Pipeline/Job/CommandGroup/Command), `launch` (executors), `cli`.
"""

__version__ = "0.1.0"
