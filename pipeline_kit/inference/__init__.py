"""The generation script and what it runs on: typed config from ++overrides, prompt configs, async LiteLLM requests,
generation types as tasks (tasks.py; named in registry.py: generate with TIR, reward, GenSelect, Magpie) and the files
of one unit (chunks, seeds, resume, .done keys), the job's measurements (job_figures.py). Runs inside jobs; its
Command in a job is pipeline_kit.components.client."""

from pipeline_kit.inference.registry import DEFAULT_GENERATION_TYPE, GENERATION_TYPES

__all__ = ["DEFAULT_GENERATION_TYPE", "GENERATION_TYPES"]
