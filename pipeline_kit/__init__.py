"""pipeline_kit: the `kit` CLI, the job builders and declarative job layer under it, and the code its jobs run.

Layers, top to bottom (each imports only those below it; pyproject.toml's [tool.importlinter] checks it):
- submission side: `cli`, `recipes`, `jobs` (job builders), `components` (server, sandbox and client as Commands),
  `launch` (run_pipeline, executors), `pipeline` (Pipeline/Job/CommandGroup/Command), `servers` (server types),
  `cluster` (cluster configs);
- inside jobs: `training`, `benchmarks` (the registry), `inference` (generation, TIR), `evaluation` (metrics,
  summaries), `sandbox` (code execution), `selection` (voting, GenSelect's tournament), then `grading`;
- leaf helpers: `errors`, `atomic`, `jsonl` and a few more single modules.
"""

__version__ = "0.1.0"
