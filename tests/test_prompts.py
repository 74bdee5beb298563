"""Prompt configs with few-shot examples: the example of docs/generation/prompts.md renders into the request exactly
as the page says (against the stub server), and a bad config is one line, exit 2, before any request: in the
generation script, and at submission (`kit generate`, also its --dry_run) before anything is queued."""

from __future__ import annotations

import json

import pytest
import yaml
from conftest import example_block, generate

from pipeline_kit.errors import UserError
from pipeline_kit.inference.prompts import NOT_PROMPTS, PROMPTS_DIR, load_prompt_config


def test_the_documented_few_shot_example_renders_into_the_request_as_shown(stub, tmp_path):
    server = stub()
    prompt = tmp_path / "few_shot.yaml"
    prompt.write_text(example_block("few-shot"))
    inp, out = tmp_path / "in.jsonl", tmp_path / "output.jsonl"
    inp.write_text(json.dumps({"problem": "What is 3+4?"}) + "\n")
    res = generate(
        f"++input_file={inp}", f"++output_file={out}", f"++server.base_url={server.url}", "++server.model=stub",
        f"++prompt_config={prompt}",
    )  # fmt: skip
    assert res.returncode == 0, res.stderr
    (sent,) = server.requests()
    assert sent["body"]["messages"] == [
        {"role": "system", "content": "You are a careful mathematician."},
        {"role": "user", "content": example_block("few-shot-rendered").rstrip("\n")},
    ]


def test_an_assistant_prefix_is_continued_and_begins_the_generation(stub, tmp_path):
    """The prefill goes out as a last assistant message to continue (chat), or after the rendered template (text)."""
    server = stub()
    prompt = tmp_path / "prefill.yaml"
    prompt.write_text('user: "{problem}"\nassistant_prefix: "Adding {a} and 4: "\n')
    template = tmp_path / "t.jinja"
    template.write_text("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}assistant: ")
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"problem": "What is 3+4?", "a": 3}) + "\n")
    common = [
        f"++input_file={inp}",
        f"++server.base_url={server.url}",
        "++server.model=stub",
        f"++prompt_config={prompt}",
    ]
    for endpoint in ("chat", "text"):
        out = tmp_path / f"{endpoint}.jsonl"
        text = [f"++server.endpoint={endpoint}", f"++server.chat_template={template}"]
        res = generate(*common, f"++output_file={out}", *text)
        assert res.returncode == 0, res.stderr
        assert json.loads(out.read_text())["generation"] == "Adding 3 and 4: \\boxed{4}"  # the stub's last number
    chat, text = (r["body"] for r in server.requests())
    assert chat["messages"] == [
        {"role": "user", "content": "What is 3+4?"},
        {"role": "assistant", "content": "Adding 3 and 4: "},
    ]
    assert chat["continue_final_message"] is True and chat["add_generation_prompt"] is False
    assert text["prompt"] == "user: What is 3+4?\nassistant: Adding 3 and 4: "


def test_every_shipped_prompt_config_loads():
    names = [p for p in PROMPTS_DIR.rglob("*.yaml") if p.parent.name not in NOT_PROMPTS]
    assert len(names) >= 8  # generic/*, judge/math, metamath/*
    for path in names:
        assert load_prompt_config(str(path)).user


GOOD = {
    "few_shot_template": "Q: {problem}\nA: {solution}\n\n",
    "few_shot_examples": [{"problem": "1+1", "solution": "2"}, {"problem": "2+2", "solution": "4"}],
    "user": "{examples}Q: {problem}\nA:",
}


def changed(**keys) -> dict:
    return {k: v for k, v in {**GOOD, **keys}.items() if v is not None}


BAD = [
    (
        changed(few_shot_examples=[{"problem": "1+1", "solution": "2"}, {"problem": "2+2"}]),
        "few_shot_examples[1] has no 'solution', which few_shot_template names (example 1 has: problem); add it to "
        "the example or change the template.",
    ),
    (changed(few_shot_examples=None), "'user' has an {examples} slot but there are no 'few_shot_examples'"),
    (changed(few_shot_template=None), "'few_shot_examples' needs a 'few_shot_template'"),
    (
        changed(user="Q: {problem}\nA:"),
        "'few_shot_examples' is given but neither 'system' nor 'user' has an {examples}",
    ),
    (changed(few_shot_examples={"problem": "1+1"}), "'few_shot_examples' must be a list of mappings"),
    (changed(few_shot_examples=[{"problem": "1+1", "solution": "2"}, "2+2"]), "few_shot_examples[1] must be a mapping"),
    (changed(few_shot_template="Q: {problem\n"), "'few_shot_template' is not a valid template ("),
    (changed(few_shot_template="Q: {}\n"), "'few_shot_template' has a positional slot"),
    (changed(few_shot_exampels=[]), "unknown key 'few_shot_exampels'"),
]


@pytest.mark.parametrize("config, needle", BAD)
def test_a_bad_few_shot_config_is_one_line_before_any_request(stub, tmp_path, config, needle):
    server = stub()
    prompt = tmp_path / "prompt.yaml"
    prompt.write_text(yaml.safe_dump(config))
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"problem": "3+4"}) + "\n")
    res = generate(
        f"++input_file={inp}", f"++output_file={tmp_path / 'o.jsonl'}", f"++server.base_url={server.url}",
        "++server.model=stub", f"++prompt_config={prompt}",
    )  # fmt: skip
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stderr
    assert res.stderr.startswith(f"kit generate: error: {prompt}: ") and needle in res.stderr, res.stderr
    assert server.requests() == []


def test_a_bad_example_stops_kit_generate_before_anything_is_submitted(kit, configs, none_cluster, stub, tmp_path):
    server = stub()
    prompt = tmp_path / "prompt.yaml"
    prompt.write_text(yaml.safe_dump(BAD[0][0]))
    inp = tmp_path / "in.jsonl"
    inp.write_text(json.dumps({"problem": "3+4"}) + "\n")
    common = ["--server_type=openai", f"--server_address={server.url}", "--model=stub", f"++prompt_config={prompt}"]
    res = kit("generate", *none_cluster, *common, f"--input_file={inp}", f"--output_dir={tmp_path / 'out'}")
    assert res.returncode == 2 and res.stderr.count("\n") == 1, res.stdout + res.stderr
    assert f"{prompt}: few_shot_examples[1] has no 'solution'" in res.stderr
    assert server.requests() == [] and not configs.job_dir.exists() and not (tmp_path / "out").exists()

    # a Slurm dry run checks it too (the file is on this machine)
    slurm = configs("slurm", "executor: slurm\njob_dir: /jobs\naccount: a\npartition: p\n")
    dry = kit(
        "generate", "--cluster=slurm", f"--config_dir={slurm}", "--dry_run", *common,
        "--input_file=/data/in.jsonl", "--output_dir=/data/out",
    )  # fmt: skip
    assert dry.returncode == 2 and dry.stderr.count("\n") == 1, dry.stdout + dry.stderr
    assert f"{prompt}: few_shot_examples[1] has no 'solution'" in dry.stderr
    # a path that is not on this machine may be the cluster's: the job checks it
    elsewhere = [*common[:-1], "++prompt_config=/cluster/prompts/mine.yaml"]
    ok = kit(
        "generate", "--cluster=slurm", f"--config_dir={slurm}", "--dry_run", *elsewhere,
        "--input_file=/data/in.jsonl", "--output_dir=/data/out",
    )  # fmt: skip
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "/cluster/prompts/mine.yaml" in ok.stdout


def test_examples_in_the_system_message_render_in_order(tmp_path):
    config = tmp_path / "p.yaml"
    config.write_text(yaml.safe_dump({**GOOD, "system": "Answer briefly. {examples}", "user": "Q: {problem}\nA:"}))
    prompt = load_prompt_config(str(config))
    assert prompt.fields() == {"problem"}
    assert prompt.messages({"problem": "3+4"}) == [
        {"role": "system", "content": "Answer briefly. Q: 1+1\nA: 2\n\nQ: 2+2\nA: 4\n\n"},
        {"role": "user", "content": "Q: 3+4\nA:"},
    ]


def test_a_record_without_a_field_is_named_with_its_line(tmp_path):
    config = tmp_path / "p.yaml"
    config.write_text(yaml.safe_dump(GOOD))
    with pytest.raises(UserError, match=r"needs field 'problem', which input line 3 does not have"):
        load_prompt_config(str(config)).messages({"question": "3+4"}, 3)
