"""Checkpoint averaging: the element-wise mean of the weights of several Hugging Face checkpoints of one model (the
newest N of a run), written as a new Hugging Face folder. Used by both backends for `++average_last=N`.

  python -m pipeline_kit.training.averaging OUTPUT_DIR CHECKPOINT_DIR...
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

from pipeline_kit.errors import UserError

WEIGHT_SUFFIXES = (".safetensors", ".bin", ".pt", ".pth")


def weight_files(folder: Path) -> list[str]:
    names = sorted(p.name for p in folder.glob("*.safetensors"))
    if not names:
        raise UserError(f"{folder} has no *.safetensors weights; averaging reads Hugging Face safetensors checkpoints.")
    return names


def average_checkpoints(folders: list[Path], output: Path) -> Path:
    """Average `folders` (same architecture, same shard layout) into `output`; config, tokenizer and the other
    small files come from the last folder. Written into a temporary folder beside `output`, then renamed."""
    import torch
    from safetensors.torch import load_file, save_file

    if not folders:
        raise UserError("no checkpoints to average.")
    shards = weight_files(folders[-1])
    for folder in folders[:-1]:
        if weight_files(folder) != shards:
            raise UserError(f"{folder} and {folders[-1]} have different weight files; they are not one model's.")
    tmp = output.with_name(f".{output.name}.averaging")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    for item in folders[-1].iterdir():  # config, tokenizer, generation config, index of shards
        if item.is_file() and not item.name.endswith(WEIGHT_SUFFIXES):
            shutil.copy2(item, tmp / item.name)
    for shard in shards:
        total: dict[str, torch.Tensor] = {}
        dtypes: dict[str, torch.dtype] = {}
        for folder in folders:
            tensors = load_file(str(folder / shard))
            if total and tensors.keys() != total.keys():
                raise UserError(f"{folder / shard} holds other tensors than {folders[0] / shard}.")
            for name, tensor in tensors.items():
                dtypes.setdefault(name, tensor.dtype)
                total[name] = total[name] + tensor.double() if name in total else tensor.double()
        averaged = {name: (t / len(folders)).to(dtypes[name]).contiguous() for name, t in total.items()}
        save_file(averaged, str(tmp / shard), metadata={"format": "pt"})
    if output.exists():
        shutil.rmtree(output)
    tmp.rename(output)
    return output


HALF = {"bfloat16", "float16"}


def model_dtype(folder: str | Path) -> str | None:
    """The dtype a Hugging Face folder's config.json names (`dtype`, or the older `torch_dtype`), if any."""

    config = json.loads((Path(folder) / "config.json").read_text())
    return config.get("dtype") or config.get("torch_dtype")


def cast_weights(folder: Path, dtype: str) -> None:
    """Rewrite the folder's floating-point weights (fp32 master weights of a mixed-precision run) in `dtype`, and say
    so in its config.json: the trained model keeps its base's size."""

    import torch
    from safetensors.torch import load_file, save_file

    target = getattr(torch, dtype)
    for shard in weight_files(folder):
        tensors = load_file(str(folder / shard))
        cast = {n: t.to(target) if t.is_floating_point() else t for n, t in tensors.items()}
        save_file({n: t.contiguous() for n, t in cast.items()}, str(folder / shard), metadata={"format": "pt"})
    config_path = folder / "config.json"
    config = json.loads(config_path.read_text())
    config["dtype" if "dtype" in config or "torch_dtype" not in config else "torch_dtype"] = dtype
    config_path.write_text(json.dumps(config, indent=2) + "\n")


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if len(args) < 3:
        print(
            "usage: python -m pipeline_kit.training.averaging OUTPUT_DIR CHECKPOINT_DIR CHECKPOINT_DIR...",
            file=sys.stderr,
        )
        return 2
    try:
        print(
            f"kit: averaged {len(args) - 1} checkpoints into {average_checkpoints([Path(a) for a in args[1:]], Path(args[0]))}"
        )
    except UserError as e:
        print(f"kit: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
