"""Run as a recipe stage's last job: `python -m pipeline_kit.recipes.stage_done FOLDER KEY OUTPUT...` checks that
the stage's outputs exist and records its key in FOLDER/.stage.done (atomically), so a rerun skips the stage."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from pipeline_kit.atomic import write_atomic
from pipeline_kit.errors import UserError
from pipeline_kit.recipes.stages import DONE, check_outputs


def main(argv: list[str]) -> int:
    folder, key, *outputs = argv
    try:
        check_outputs(folder, outputs)
    except UserError as e:
        print(f"kit recipe: {e}", file=sys.stderr)
        return 2
    write_atomic(Path(folder) / DONE, json.dumps({"key": key, "outputs": outputs}) + "\n")
    print(f"kit recipe: {folder} is done (key {key})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
