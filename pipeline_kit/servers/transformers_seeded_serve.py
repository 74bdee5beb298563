"""kit's launcher of `transformers serve`, the program a --server_type=transformers job runs (transformers.py
writes its command line): the same server and options, with each request's `seed` applied where its generation
runs, so that a seed reproduces its sample at any concurrency.
  python -m pipeline_kit.servers.transformers_seeded_serve MODEL [transformers serve's options: --device, --port, ...]

Why: `transformers serve` calls torch.manual_seed(seed) on its event loop when a request arrives, but generates on
one inference thread, one request after another, from the process's single torch generator. With several requests
in flight the seeds of later arrivals reset that generator before (or while) earlier requests sample, so a sample
depends on the timing of the others. Here the seed travels with the request's GenerationConfig (as `kit_seed`) and
is set on the inference thread right before that request's `generate`. Generation stays sequential as before, so a
sample is a function of its prompt, its sampling settings and its seed alone (on a GPU, up to its kernels' own
determinism). Not with `--continuous-batching`: there transformers batches requests under the first request's
sampling settings and one generator, so seeds are not per request.

Imports stdlib only at the top (it runs in the model's env, where kit's other dependencies may be missing)."""

from __future__ import annotations

import functools
import sys

SEED_ATTRIBUTE = "kit_seed"  # on a request's GenerationConfig, from its `seed`


def seed_each_generation() -> None:
    """Move the seed from the request's arrival to the start of its generation (see the module's docstring)."""
    import torch
    import transformers

    try:
        from transformers.cli.serving.utils import BaseHandler
        from transformers.generation.utils import GenerationMixin

        build, generate = BaseHandler._build_generation_config, GenerationMixin.generate
    except (ImportError, AttributeError) as e:
        sys.exit(
            f"kit: error: kit's transformers server needs `transformers serve` of transformers 5 "
            f"(transformers.cli.serving.utils.BaseHandler._build_generation_config); this env has transformers "
            f"{transformers.__version__} ({e}). Install transformers[serving]>=5 into the server's env."
        )

    def build_without_seed(self, body: dict, model_generation_config, use_cb: bool = False):
        config = build(self, {k: v for k, v in body.items() if k != "seed"}, model_generation_config, use_cb=use_cb)
        if body.get("seed") is not None:
            setattr(config, SEED_ATTRIBUTE, int(body["seed"]))
        return config

    @functools.wraps(generate)
    def seeded_generate(self, *args, **kwargs):
        seed = getattr(kwargs.get("generation_config"), SEED_ATTRIBUTE, None)
        if seed is not None:
            torch.manual_seed(seed)  # on the calling (inference) thread; seeds every CUDA device too
        return generate(self, *args, **kwargs)

    BaseHandler._build_generation_config = build_without_seed
    GenerationMixin.generate = seeded_generate


def main(argv: list[str] | None = None) -> None:
    seed_each_generation()
    from transformers.cli.transformers import app

    app(["serve", *(sys.argv[1:] if argv is None else argv)], prog_name="transformers")


if __name__ == "__main__":
    main()
