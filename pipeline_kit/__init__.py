"""pipeline_kit: the `kit` CLI and the declarative job layer under it.

Subpackages: `cluster` (cluster configs), `pipeline` (Pipeline/Job/CommandGroup/Command), `launch` (executors),
`servers`, `inference` (generation, TIR), `sandbox` (code execution), `cli`.
"""

__version__ = "0.1.0"
