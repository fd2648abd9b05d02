"""Real models and tasks, without engines: the math verifier, JSONL task files and model
directories (bad ones are errors naming the file and line, exit 2, nothing written), the chat
template and stop tokens of a locally created Qwen2 directory, the ranks' micro-batch plan."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from laminar.cli import main
from laminar.config.runtime import JsonlTask
from laminar.runtime.models.pretrained import ModelDirError, check_model_dir
from laminar.runtime.tasks.jsonl import JsonlTaskGen, TaskFileError, load_rows
from laminar.runtime.tasks.verifier import final_answer, is_correct
from laminar.runtime.train.ranks import rank_plan


@pytest.mark.parametrize(
    "response, reference, ok",
    [
        ("so \\boxed{42}.", "42", True),
        ("first \\boxed{1} then \\boxed{\\frac{1}{2}}", "0.5", True),
        ("The answer is 1,234.", "1234", True),
        ("3 apples and 4 pears: 7", "7", True),
        ("it is 7.0", "7", True),
        ("\\boxed{\\text{east}}", "east", True),
        ("\\boxed{x+1}", "x + 1", True),
        ("no digits here", "3", False),
        ("\\boxed{41}", "42", False),
        ("\\boxed{7", "7", True),  # unbalanced box: falls back to the last number
        ("answer: -3", "-3", True),
    ],
)
def test_verifier(response, reference, ok):
    assert is_correct(response, reference) is ok


@given(st.integers(-(10**6), 10**6), st.text(alphabet="abc xyz.,", max_size=30))
def test_verifier_finds_a_boxed_integer_anywhere(n, noise):
    assert final_answer(f"{noise} \\boxed{{{n}}} {noise}") == str(n)
    assert is_correct(f"{noise}\\boxed{{{n}}}{noise}", str(n))


def test_jsonl_rows_and_seeded_order(tmp_path):
    f = tmp_path / "t.jsonl"
    f.write_text('{"prompt": "1+1?", "answer": 2}\n\n{"prompt": "2+2?", "answer": "4"}\n')
    assert load_rows(f) == [("1+1?", "2"), ("2+2?", "4")]
    gen = JsonlTaskGen(JsonlTask(path=str(f)), seed=0, max_answer_len=8)
    first = {gen.prompt(i).text for i in range(2)}
    assert first == {"1+1?", "2+2?"}  # one pass visits every row once
    p = gen.prompt(0)
    assert gen.reward(p, f"\\boxed{{{p.answer}}}", finished=True) == 1.0
    assert gen.reward(p, f"\\boxed{{{p.answer}}}", finished=False) == 0.0


@pytest.mark.parametrize(
    "text, line, what",
    [
        ('{"prompt": "a", "answer": 1}\n{"prompt": "b"\n', 2, "not valid JSON"),
        ('{"prompt": "a", "answer": 1}\n[1, 2]\n', 2, "expected an object"),
        ('{"prompt": "", "answer": 1}\n', 1, "'prompt'"),
        ('{"prompt": "a", "answer": null}\n', 1, "'answer'"),
        ('{"prompt": "a", "answer": true}\n', 1, "'answer'"),
    ],
)
def test_bad_task_file_names_file_and_line(tmp_path, text, line, what):
    f = tmp_path / "bad.jsonl"
    f.write_text(text)
    with pytest.raises(TaskFileError) as e:
        load_rows(f)
    assert f"{f}, line {line}" in str(e.value) and what in str(e.value)


def test_missing_or_empty_task_file(tmp_path):
    with pytest.raises(TaskFileError, match="cannot read"):
        load_rows(tmp_path / "nope.jsonl")
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(TaskFileError, match="no prompts"):
        load_rows(tmp_path / "empty.jsonl")


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    from laminar.runtime.models.localmodel import make_model_dir

    return make_model_dir(tmp_path_factory.mktemp("m") / "qwen", seed=0)


def test_local_qwen2_dir_chat_template_and_stop_tokens(model_dir):
    from laminar.runtime.models.codec import HfCodec, prompt_ids

    config = check_model_dir(model_dir)
    assert config["model_type"] == "qwen2" and config["tie_word_embeddings"]
    codec = HfCodec(str(model_dir))
    assert len(codec.stop_ids) >= 2  # end of turn and the generation config's extra EOS
    text = codec._tok.decode(prompt_ids(codec, "What is 3 plus 4?"))
    assert text.startswith("<|im_start|>user\nWhat is 3 plus 4?") and text.endswith("assistant\n")
    assert codec.decode(codec.encode("so \\boxed{7}.")) == "so \\boxed{7}."


@pytest.mark.parametrize(
    "damage, where",
    [
        (lambda d: (d / "config.json").write_text("{oops"), "config.json, line 1"),
        (lambda d: (d / "tokenizer.json").unlink(), "tokenizer.json: missing"),
        (lambda d: (d / "model.safetensors").unlink(), "no *.safetensors"),
        (lambda d: (d / "chat_template.jinja").unlink(), "no chat_template"),
    ],
)
def test_bad_model_dir_names_the_file(model_dir, tmp_path, damage, where):
    import shutil

    d = tmp_path / "m"
    shutil.copytree(model_dir, d)
    tok_cfg = json.loads((d / "tokenizer_config.json").read_text())
    tok_cfg.pop("chat_template", None)
    (d / "tokenizer_config.json").write_text(json.dumps(tok_cfg))
    damage(d)
    with pytest.raises(ModelDirError, match=where.replace("*", r"\*")):
        check_model_dir(d)


def test_cli_bad_task_file_exits_2_and_writes_nothing(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "a", "answer": 1}\nnot json\n')
    out = tmp_path / "run"
    code = main(
        [
            "train",
            "--no-progress",
            "--out",
            str(out),
            "--set",
            f"runtime.task={{type: jsonl, path: {bad}}}",
        ]
    )
    assert code == 2 and not out.exists()
    assert f"{bad}, line 2" in capsys.readouterr().err


@given(
    st.lists(st.integers(1, 300), min_size=1, max_size=40), st.integers(1, 4), st.integers(1, 2000)
)
def test_rank_plan_covers_every_trajectory_once_same_depth(lengths, ranks, max_tokens):
    plan = rank_plan(lengths, ranks, max_tokens)
    assert len(plan) == ranks and len({len(p) for p in plan}) == 1
    seen = sorted(i for p in plan for mb in p for i in mb)
    assert seen == list(range(len(lengths)))
