"""pipeline_kit: the `kit` CLI and the declarative job layer under it.

Subpackages: `cluster` (cluster configs), `pipeline` (Pipeline/Job/CommandGroup/Command), `jobs` (job builders),
`launch` (run_pipeline, executors), `servers`, `inference` (generation, TIR), `sandbox` (code execution), `cli`.
"""

__version__ = "0.1.0"
