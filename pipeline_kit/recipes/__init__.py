"""Recipes: multi-stage pipelines (AIMO's SFT → TIR SFT → GRPO → eval, MetaMath augmentation, Magpie data) built
from the same job builders as the CLI, with content-keyed stages so that a rerun submits only what changed."""
