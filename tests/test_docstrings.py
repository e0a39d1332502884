"""Every metric's examples run: the module docstring's, the way evaluate's own
test suite runs them (tests/test_metric_common.py in huggingface/evaluate: the
module is imported through evaluate's loader, ``evaluate.load`` is patched to
load local modules, and ``doctest.testmod`` runs with ``raise_on_error``), and
the metric card's ``## Examples``, offline on the project's checkpoints. Both
run from a directory outside the checkout, so that no example leans on
relative paths.

The cards are also held to the shape of evaluate's own cards (Hub front
matter, the sections in order, at most 200 lines, as the project guide asks), with their run history
in ``benchmarks/history/<name>.md``."""

import doctest
import importlib
import inspect
import os
import re
from unittest import mock

import evaluate
import numpy as np
import pytest

from d2t_metrics import available_metrics, metric_path

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# evaluate's card sections, in order (its cards put Values from Popular Papers under Output Values)
CARD_SECTIONS = ("## Metric Description", "## How to Use", "### Inputs", "## Output Values",
                 "### Values from Popular Papers", "## Examples", "## Limitations and Bias", "## Citation",
                 "## Further References")
MAX_CARD_LINES = 200
PYTHON_BLOCK = re.compile(r"```python\n(.*?)```", flags=re.S)


def card_text(name):
    with open(os.path.join(metric_path(name), "README.md"), encoding="utf-8") as f:
        return f.read()


def card_section(card, heading):
    """The text of one ``## `` section of a card: from its heading to the next ``## `` heading."""
    start = card.index("\n" + heading + "\n")
    end = card.find("\n## ", start + 1)
    return card[start:end if end != -1 else len(card)]


def run_doctest_block(block, namespace, label):
    """Run one ``>>>`` block with ``namespace`` as its globals (names it defines are kept
    for the card's next block); return the failure report, empty when it passed."""
    test = doctest.DocTestParser().get_doctest(block, namespace, label, label, 0)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    report = []
    runner.run(test, out=report.append, clear_globs=False)
    namespace.update(test.globs)
    return "".join(report) if runner.failures else ""


@pytest.mark.parametrize("name", available_metrics())
def test_docstring_examples_run_under_evaluates_harness(name, tmp_path, monkeypatch):
    from evaluate.loading import evaluation_module_factory, import_main_class

    module = importlib.import_module(evaluation_module_factory(metric_path(name)).module_path)
    metric_class = import_main_class(module.__name__)
    # evaluate's harness refuses **kwargs in _compute: every option must be named.
    parameters = inspect.signature(metric_class._compute).parameters.values()
    assert all(p.kind != p.VAR_KEYWORD for p in parameters)

    real_load = evaluate.load

    def load_local(path, *args, **kwargs):  # what evaluate's use_local_metrics() does
        return real_load(os.path.join(os.path.dirname(metric_path(name)), path), *args, **kwargs)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("D2T_NO_PROGRESS", "1")
    with mock.patch("evaluate.load", side_effect=load_local):
        try:
            results = doctest.testmod(module, verbose=False, raise_on_error=True, optionflags=doctest.ELLIPSIS)
        except doctest.UnexpectedException as e:
            raise e.exc_info[1]
        except doctest.DocTestFailure as e:
            pytest.fail(f"{name}: {e.example.source.strip()} gave {e.got!r}, expected {e.example.want!r}")
    assert results.failed == 0
    assert results.attempted > 1


@pytest.mark.parametrize("name", available_metrics())
def test_card_examples_run_offline(name, tmp_path, monkeypatch):
    """The card's ``## Examples`` blocks run in order in one namespace (a later block may use
    what an earlier one loaded): ``>>>`` blocks as doctests, plain blocks as code."""
    examples = card_section(card_text(name), "## Examples")
    blocks = PYTHON_BLOCK.findall(examples)
    assert blocks, f"metrics/{name}/README.md: no ```python block under ## Examples"
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("D2T_NO_PROGRESS", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    namespace = {}
    for i, block in enumerate(blocks):
        label = f"metrics/{name}/README.md, example {i + 1}"
        if block.lstrip().startswith(">>>"):
            failure = run_doctest_block(block, namespace, label)
            assert not failure, failure
        else:
            exec(compile(block, label, "exec"), namespace)
    if "make_compute_metrics" in namespace:
        drive_compute_metrics_hook(namespace["make_compute_metrics"], tmp_path)


def drive_compute_metrics_hook(make_compute_metrics, tmp_path):
    """Call a card's Trainer hook as a Trainer would: token ids, with -100 in the labels."""
    from d2t_metrics.testing import _save_tokenizer

    tokenizer = _save_tokenizer(str(tmp_path))
    preds = np.array(tokenizer(["the eagle is a coffee shop"], padding="max_length", max_length=12)["input_ids"])
    labels = np.array(tokenizer(["the eagle is a coffee shop near the river"], padding="max_length", max_length=12)["input_ids"])
    labels[labels == tokenizer.pad_token_id] = -100
    hook = make_compute_metrics(tokenizer, ["name[The Eagle], eatType[coffee shop], near[the river]"])
    scores = hook((preds, labels))
    assert set(scores) >= {"precision", "recall", "f1"}
    assert 0.0 < scores["f1"] <= 1.0


@pytest.mark.parametrize("name", available_metrics())
def test_card_reads_as_an_evaluate_card(name):
    card = card_text(name)
    lines = card.splitlines()
    assert len(lines) <= MAX_CARD_LINES, f"metrics/{name}/README.md has {len(lines)} lines (at most {MAX_CARD_LINES})"
    # The Hub Space's front matter, then the title evaluate's cards use.
    assert card.startswith("---\n")
    front_matter = card.split("\n---\n", 1)[0]
    for key in ("title:", "sdk: gradio", "app_file: app.py", "- evaluate", "- metric", "description:"):
        assert key in front_matter, f"{name}: front matter lacks {key!r}"
    assert "\n# Metric Card for " in card
    positions = [card.find("\n" + heading + "\n") for heading in CARD_SECTIONS]
    missing = [h for h, p in zip(CARD_SECTIONS, positions) if p == -1]
    assert not missing, f"metrics/{name}/README.md lacks {missing}"
    assert positions == sorted(positions), f"metrics/{name}/README.md: sections out of evaluate's order"
    # Every python block parses (the How to Use ones load Hub models, so they are only compiled).
    for i, block in enumerate(PYTHON_BLOCK.findall(card)):
        source = block if not block.lstrip().startswith(">>>") else "\n".join(
            e.source for e in doctest.DocTestParser().get_examples(block))
        compile(source, f"metrics/{name}/README.md, python block {i + 1}", "exec")
    # The run history lives in benchmarks/history/<name>.md, linked from the card.
    assert f"benchmarks/history/{name}.md" in card
    assert os.path.isfile(os.path.join(ROOT, "benchmarks", "history", f"{name}.md"))
    # Training lives outside the metric folders now.
    assert not re.search(rf"python -m metrics\.{name}\.", card), f"{name}: a command still names metrics.{name}"
