"""GRPO's reward: kit's own grader (answer extraction + math equivalence) on each completion, in the grader's
process pool, never in the trainer's thread; plus the greedy eval that GRPO logs every ++eval_steps."""

from __future__ import annotations

from pipeline_kit.grading.extraction import final_boxed
from pipeline_kit.grading.grade import task_of
from pipeline_kit.grading.grader_pool import grade_tasks
from pipeline_kit.inference.reasoning import split_reasoning
from pipeline_kit.training.config import RewardConfig


def completion_text(completion) -> str:
    """A completion as TRL hands it over: text, or a conversational list of messages (the assistant's content)."""
    if isinstance(completion, str):
        return completion
    return "".join(m.get("content") or "" for m in completion if isinstance(m, dict))


def score(texts: list[str], expected: list, cfg: RewardConfig) -> tuple[list[float], list[bool], list[bool]]:
    """(reward, correct, boxed) per completion: `correct` or `incorrect`, plus `boxed` when the answer is boxed;
    with `parse_reasoning`, of the answer part alone (inference/reasoning.py, as kit eval splits a sample)."""
    if cfg.parse_reasoning:
        texts = [split_reasoning(t, cfg.end_reasoning_string).answer for t in texts]
    tasks = [
        task_of({"generation": t, "expected_answer": e}, "completion", cfg.extract_mode)
        for t, e in zip(texts, expected, strict=True)
    ]
    verdicts = grade_tasks(tasks, workers=cfg.workers, timeout=cfg.timeout)
    boxed = [final_boxed(t) is not None for t in texts]
    rewards = [
        (cfg.correct if v.correct else cfg.incorrect) + (cfg.boxed if b else 0.0)
        for v, b in zip(verdicts, boxed, strict=True)
    ]
    return rewards, [v.correct for v in verdicts], boxed


class GraderReward:
    """A TRL reward function (called with the batch's columns as keyword lists)."""

    __name__ = "kit_grader"

    def __init__(self, cfg: RewardConfig) -> None:
        self.cfg = cfg

    def __call__(self, prompts, completions, expected_answer, log_metric=None, **_kwargs) -> list[float]:
        rewards, correct, boxed = score([completion_text(c) for c in completions], list(expected_answer), self.cfg)
        if log_metric is not None:
            log_metric("accuracy", sum(correct) / len(correct))
            log_metric("boxed_rate", sum(boxed) / len(boxed))
        return rewards


def make_eval_callback(trainer, records: list[dict], prompts: list, tokenizer, every: int, max_new_tokens: int, cfg):
    """A TrainerCallback that, every `every` steps, answers `prompts` greedily and logs eval/accuracy and
    eval/boxed_rate (graded like the reward) through the trainer's loggers."""
    import torch
    from transformers import TrainerCallback

    texts = [tokenizer.apply_chat_template(p, tokenize=False, add_generation_prompt=True) for p in prompts]
    expected = [r["expected_answer"] for r in records]

    def answer(model) -> list[str]:
        side, tokenizer.padding_side = tokenizer.padding_side, "left"
        was_training, out_texts = model.training, []
        model.eval()
        with torch.no_grad():
            for start in range(0, len(texts), 32):
                batch = tokenizer(
                    texts[start : start + 32], return_tensors="pt", padding=True, add_special_tokens=False
                )
                batch = batch.to(model.device)
                out = model.generate(**batch, max_new_tokens=max_new_tokens, do_sample=False)
                out_texts += tokenizer.batch_decode(out[:, batch["input_ids"].shape[1] :], skip_special_tokens=True)
        tokenizer.padding_side = side
        model.train(was_training)
        return out_texts

    class GreedyEval(TrainerCallback):
        def on_step_end(self, args, state, control, model=None, **kwargs):
            if state.global_step % every or model is None:
                return control
            _, correct, boxed = score(answer(model), expected, cfg)
            metrics = {"eval/accuracy": sum(correct) / len(correct), "eval/boxed_rate": sum(boxed) / len(boxed)}
            print(
                f"kit train: step {state.global_step}: greedy eval on {len(texts)} problems: accuracy "
                f"{metrics['eval/accuracy']:.3f}, boxed {metrics['eval/boxed_rate']:.3f}",
                flush=True,
            )
            trainer.log(metrics)
            return control

    return GreedyEval()
