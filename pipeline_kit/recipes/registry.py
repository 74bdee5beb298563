"""The recipes `kit run_recipe NAME` knows: each is a flag dataclass (its parameters, shown by --help) and a
function that turns those flags and a cluster into the recipe's stages."""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from pipeline_kit.errors import UserError, did_you_mean


@dataclass(frozen=True)
class Recipe:
    """`module` defines `Params` (a dataclass of typer options) and `stages(cluster, params) -> list[Stage]`."""

    name: str
    help: str
    module: str

    def load(self):
        return importlib.import_module(self.module)


RECIPES = {
    r.name: r
    for r in (
        Recipe("aimo", "CoT SFT → TIR SFT → GRPO → eval, each stage skipped when done with the same settings.",
               "pipeline_kit.recipes.aimo"),
        Recipe("metamath", "MetaMath augmentation (AnsAug, rephrasing, self-verification, FOBAR): sampled solutions "
               "whose answers check out, as MetaMathQA query/response records.", "pipeline_kit.recipes.metamath"),
        Recipe("magpie_math", "Magpie-style math data: problems → SFT solutions → sampled responses → scores → DPO "
               "pairs.", "pipeline_kit.recipes.magpie_math"),
    )
}  # fmt: skip


def get_recipe(name: str) -> Recipe:
    if name not in RECIPES:
        raise UserError(f"unknown recipe '{name}'.{did_you_mean(name, list(RECIPES))} Known: {', '.join(RECIPES)}.")
    return RECIPES[name]
