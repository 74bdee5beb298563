"""The generation types kit knows, by `++generation_type` name: each names the `module:Class` of its task (a
GenerationTask, see tasks.py), imported only when that type is asked for. A new type is a module and a line below;
a type of the user's own is given as `++generation_type=package.module:Class`."""

from pipeline_kit.plugins import load

DEFAULT_GENERATION_TYPE = "generate"  # its .done keys leave out the generation type (they predate the other types)

GENERATION_TYPES: dict[str, str] = {
    "generate": "pipeline_kit.inference.generate_task:GenerateTask",
    "reward": "pipeline_kit.inference.reward:RewardTask",
    "genselect": "pipeline_kit.inference.genselect:GenSelectTask",
    "magpie": "pipeline_kit.inference.magpie:MagpieTask",
}


def task_class(name: str) -> type:
    """The class of `++generation_type=NAME` (a tasks.GenerationTask): a name above, or package.module:Class."""
    return load(name, GENERATION_TYPES, "++generation_type", "generation types")  # type: ignore[return-value]
