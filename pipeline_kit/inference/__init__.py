"""The generation script and what it runs on: typed config from ++overrides, prompt configs, async LiteLLM requests,
generation types (TIR, GenSelect, reward, Magpie) and the files of one unit (chunks, seeds, resume, .done keys).
Runs inside jobs; its Command in a job is pipeline_kit.components.client."""
