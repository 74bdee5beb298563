"""Typed config of the generation script, filled from `++key=value` overrides parsed by hydra-core's override
grammar. An unknown key, a wrong type or a missing required value is one clear error naming the key."""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields, is_dataclass

from pipeline_kit.errors import UserError, closest, did_you_mean

MISSING = "???"  # omegaconf's marker for a required value


@dataclass
class ServerConfig:
    base_url: str = MISSING  # the OpenAI-compatible root, e.g. http://127.0.0.1:8000/v1
    model: str = MISSING  # the name the server serves the model under
    server_type: str | None = None  # vllm, sglang, ... (set by kit generate; part of the .done key)
    api_key_env: str | None = None  # env var holding the API key (external endpoints)
    endpoint: str = "chat"  # chat | text (text applies the chat template here, on the client)
    chat_template: str | None = None  # model folder or .jinja file for endpoint=text [default: model]
    ready_timeout: float = 600.0  # seconds to wait for the server kit started to answer /v1/models
    external_ready_timeout: float = 20.0  # the same for a server kit did not start (--server_address): it is up or not
    server_log: str | None = None  # the server's log, whose tail is shown when it is not ready or dies


@dataclass
class InferenceConfig:
    temperature: float = 0.0
    top_p: float = 0.95
    top_k: int = -1
    tokens_to_generate: int = 2048
    random_seed: int | None = None  # set per output file by kit generate (output-rs{seed}.jsonl)
    stop_phrases: list[str] = field(default_factory=list)
    logprobs: bool = False  # ask for the tokens' log-probabilities; each sample gets `mean_logprob` (weighted votes)


@dataclass
class GenSelectConfig:
    """GenSelect (++generation_type=genselect): the model compares up to `window` candidate solutions per request
    and names the best; windows' winners meet again until one is left. Candidates are shuffled by the unit's seed."""

    window: int = 8  # candidates per request (at least 2)
    prompt_config: str = "generic/genselect"  # its user template gets {solutions}, {num_solutions}, {max_index}


@dataclass
class GenerateConfig:
    generation_type: str = "generate"  # generate | reward | genselect | magpie
    input_file: str | None = None  # the problems (required unless generation_type=genselect)
    input_dir: str | None = None  # genselect: the folder of sampled runs (output-rs*.jsonl) to pick from
    output_file: str | None = None  # one unit's output ...
    output_dir: str | None = None  # ... or a plan's folder: output[-rs{seed}][_chunk_{k}].jsonl for every unit
    units: list[str] | None = None  # with output_dir: greedy, rs3, chunk_2, rs3_chunk_2 ... [default: every chunk]
    prompt_config: str = "generic/default"
    server: ServerConfig = field(default_factory=ServerConfig)
    inference: InferenceConfig = field(default_factory=InferenceConfig)
    max_concurrent_requests: int = 512
    max_retries: int = 6  # transient errors (connection, 5xx, 429) are retried with exponential backoff
    retry_delay: float = 0.5
    request_timeout: float = 3600.0
    chunk_id: int | None = None  # this unit's chunk of the input (0-based) ...
    num_chunks: int | None = None  # ... out of this many contiguous chunks
    rerun_done: bool = False
    postprocess_cmd: str | None = None  # run once the final (merged) file is written
    # the field a sample's text goes to [generation]; another NAME also prefixes its stats (NAME_num_generated_tokens,
    # ...), so a later stage keeps an earlier one's fields. Unset, an input that already holds `generation` is refused.
    generation_key: str | None = None
    progress_every: float = 30.0  # seconds between progress lines when not on a terminal
    # tool-integrated reasoning: code blocks run in the sandbox and their output is spliced into the generation
    code_execution: bool = False
    code_tags: str = "qwen"  # a tag set under prompts/code_tags/ (qwen, tool_call) or a YAML file
    max_code_executions: int = 8  # code rounds per sample
    code_timeout: float = 10.0  # seconds per code round
    max_code_output_characters: int = 1000  # of each round's output the model sees
    code_language: str = "ipython"  # python | ipython (prints the last expression) | shell
    code_budget_note: bool = False  # tell the model after each round how many rounds it has left
    sandbox_address: str | None = None  # http://host:port of `kit start_sandbox`; --with_sandbox sets it
    sandbox_ready_timeout: float = 120.0  # seconds to wait for the sandbox's /health (it starts in about 1 s)
    genselect: GenSelectConfig = field(default_factory=GenSelectConfig)

    def check_inputs(self) -> None:
        """The input each generation type reads: ++input_file (a generation), ++input_dir (GenSelect's runs)."""
        if self.generation_type not in GENERATION_TYPES:
            raise UserError(
                f"generation: ++generation_type={self.generation_type} is not one of {', '.join(GENERATION_TYPES)}."
                f"{did_you_mean(self.generation_type, list(GENERATION_TYPES))}"
            )
        genselect = self.generation_type == "genselect"
        if genselect and self.input_dir is None:
            raise UserError(
                "generation: ++generation_type=genselect needs ++input_dir (the folder of output-rs*.jsonl)."
            )
        if not genselect and self.input_dir is not None:
            raise UserError("generation: ++input_dir is GenSelect's input; add ++generation_type=genselect or drop it.")
        if not genselect and self.input_file is None:
            raise UserError("generation: ++input_file is required; pass it (e.g. ++input_file=...).")
        if genselect and self.genselect.window < 2:
            raise UserError(f"++genselect.window={self.genselect.window}: a window compares at least 2 solutions.")


# what the generation script does with its input: each type's task (rows, open_model, sample), as module:class
GENERATION_TYPES = {
    "generate": "pipeline_kit.inference.generate:GenerateTask",
    "reward": "pipeline_kit.inference.reward:RewardTask",
    "genselect": "pipeline_kit.inference.genselect:GenSelectTask",
    "magpie": "pipeline_kit.inference.magpie:MagpieTask",
}


def override_value(value: str) -> str:
    """`value` as a quoted string of the override grammar, read back unchanged: quotes and trailing backslashes are
    escaped, and so is `${`, which OmegaConf would take for an interpolation (shell commands use it)."""
    value = re.sub(r"(\\+)(?='|$)", lambda m: m.group(1) * 2, value)
    value = re.sub(r"(\\*)\$\{", lambda m: m.group(1) * 2 + "\\${", value)
    return "'" + value.replace("'", "\\'") + "'"


def override_text(value: str) -> str:
    """`value` as an override value: bare when the grammar reads it back unchanged, else quoted (override_value)."""
    return value if value and _SIMPLE.match(value) else override_value(value)


def parse_overrides(args: list[str], what: str = "generation", complete: bool = True, schema: type = GenerateConfig):
    """`++a.b=value` (also `a.b=value` and `+a.b=value`) → an instance of `schema` (a dataclass; default
    GenerateConfig), checked key by key. With `complete=False` only the given overrides are checked (required keys
    may be missing) and None is returned."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException
    from omegaconf import OmegaConf
    from omegaconf.errors import OmegaConfBaseException

    cfg = OmegaConf.structured(schema)
    try:
        overrides = OverridesParser.create().parse_overrides([a.removeprefix("++").removeprefix("+") for a in args])
    except OverrideParseException as e:
        raise UserError(f"{what}: cannot parse override ({str(e).splitlines()[0]}); write ++key=value.") from None
    for override in overrides:
        key = override.key_or_group
        _check_key(key, what, schema)
        try:
            OmegaConf.update(cfg, key, override.value(), merge=True)
        except OmegaConfBaseException as e:
            raise UserError(f"{what}: ++{key}={override.input_line.split('=', 1)[1]}: {_first_line(e)}") from None
    if not complete:
        return None
    try:
        parsed = OmegaConf.to_object(cfg)
    except OmegaConfBaseException as e:
        key = getattr(e, "full_key", "") or "?"
        raise UserError(f"{what}: ++{key} is required; pass it (e.g. ++{key}=...).") from None
    if isinstance(parsed, GenerateConfig):
        parsed.check_inputs()
    return parsed


_SIMPLE = re.compile(r"^[A-Za-z0-9_./:@+-]*$")  # a value that needs no quoting in hydra's grammar


def take_override(args: tuple[str, ...] | list[str], key: str) -> tuple[str | None, tuple[str, ...]]:
    """The value of the last `++key=value` in `args` (as the script would read it) and the other arguments."""
    ours = [a for a in args if a.removeprefix("++").removeprefix("+").partition("=")[0] == key]
    rest = tuple(a for a in args if a not in ours)
    if not ours:
        return None, rest
    raw = ours[-1].partition("=")[2]
    if _SIMPLE.match(raw):
        return raw, rest
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import OverrideParseException

    try:
        return str(OverridesParser.create().parse_override(ours[-1].removeprefix("++").removeprefix("+")).value()), rest
    except OverrideParseException as e:
        raise UserError(f"cannot parse {ours[-1]} ({str(e).splitlines()[0]}); write ++{key}=value.") from None


def check_overrides(args: list[str] | tuple[str, ...], what: str = "generation", schema: type = GenerateConfig) -> None:
    """The check at submission, without importing hydra (a quarter of a second) in the common case: every key
    exists (with a did-you-mean) and each plain value fits its field's type. An override this does not settle
    (lists, quoted strings, a value that does not fit) goes through `parse_overrides`, which gives the error."""
    import typing

    for arg in args:
        key, sep, value = arg.removeprefix("++").removeprefix("+").partition("=")
        if not sep or not _SIMPLE.match(value):
            parse_overrides(list(args), what, complete=False, schema=schema)
            return
        _check_key(key, what, schema)
        node: type = schema
        *parents, leaf = key.split(".")
        for part in parents:
            node = typing.get_type_hints(node)[part]
        if not _fits(typing.get_type_hints(node)[leaf], value):
            parse_overrides(list(args), what, complete=False, schema=schema)
            return


def _fits(annotation: object, value: str) -> bool:
    """Whether a plain override value converts to the field's type as OmegaConf would."""
    import types
    import typing

    options = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    if value == "null":
        return type(None) in options
    for option in options:
        if option is str or (option is bool and value.lower() in ("true", "false")):
            return True
        if option in (int, float):
            try:
                option(value)
                return True
            except ValueError:
                continue
    return False


def _check_key(key: str, what: str, schema: type) -> None:
    node: type = schema
    path = []
    for part in key.split("."):
        names = [f.name for f in fields(node)]
        if part not in names:
            prefix = ".".join(path)
            best = _closest_key(key, dotted_keys(schema))
            hint = f" Did you mean ++{best}?" if best else ""
            valid = ", ".join(f"{prefix + '.' if prefix else ''}{n}" for n in names)
            raise UserError(f"{what}: unknown key ++{key}.{hint} Valid keys here: {valid}.")
        path.append(part)
        node_type = {f.name: f for f in fields(node)}[part]
        default = node_type.default_factory() if callable(node_type.default_factory) else None
        if is_dataclass(default):
            node = type(default)
        elif part != key.split(".")[-1]:
            raise UserError(f"{what}: ++{key}: '{'.'.join(path)}' is a value, not a group; drop the rest.")


def dotted_keys(schema: type, prefix: str = "") -> list[str]:
    """Every leaf key of `schema` with its groups, e.g. inference.temperature."""
    out = []
    for f in fields(schema):
        default = f.default_factory() if callable(f.default_factory) else None
        name = f"{prefix}{f.name}"
        out += dotted_keys(type(default), f"{name}.") if is_dataclass(default) else [name]
    return out


def _closest_key(key: str, keys: list[str]) -> str | None:
    """The full key meant by a misspelled or misplaced one: the same last part in another group (NeMo-Skills'
    ++tokens_to_generate is ++inference.tokens_to_generate), else the closest full key, else the closest last part."""
    leaf = key.rsplit(".", 1)[-1]
    same_leaf = [k for k in keys if k.rsplit(".", 1)[-1] == leaf]
    if len(same_leaf) == 1:
        return same_leaf[0]
    best = closest(key, keys)
    if best:
        return best
    by_leaf = {k.rsplit(".", 1)[-1]: k for k in keys}
    near = closest(leaf, list(by_leaf))
    return by_leaf[near] if near else None


def _first_line(e: Exception) -> str:
    return str(e).splitlines()[0].strip()
