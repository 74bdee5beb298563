"""The generation client: typed config from ++overrides, prompt configs, async LiteLLM requests, and the files of
one generation unit (chunks, seeds, in-progress resume, .done markers, merging)."""
