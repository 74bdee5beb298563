"""Recipes: the stage machinery (stages.py, stage_done.py, flags.py: the API a recipe's pipeline file is built on),
the in-job data steps of the bundled recipes, and RECIPES, the names `kit run_recipe NAME` knows."""

# name -> the recipe's pipeline file, under the top-level recipes/ folder (a wheel's copy: resources.py). A new
# bundled recipe is a folder there and a line here; a user's own is `kit run_recipe path/to/pipeline.py` or
# `kit run_recipe my_pkg.my_module` (registry.py loads both).
RECIPES: dict[str, str] = {
    "aimo": "aimo/pipeline.py",
    "magpie_math": "magpie_math/pipeline.py",
    "metamath": "metamath/pipeline.py",
}


def is_user_recipe(ref: str) -> bool:
    """A path to a pipeline file or a dotted module name: not a name of RECIPES (those have neither '/' nor '.')."""
    return "/" in ref or "." in ref
