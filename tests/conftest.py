import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from d2t_metrics.datasets import shared_dir  # noqa: E402

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("D2T_NO_PROGRESS", "1")


@pytest.fixture(scope="session")
def shared():
    """Path to ../shared (data, golden values); skips with a message when absent."""
    path = shared_dir()
    if path is None:
        pytest.skip("../shared is absent (set D2T_SHARED to its path); data-backed test skipped")
    return path


@pytest.fixture(scope="session")
def build(tmp_path_factory):
    """``(source copy, wheel, work dir)``: the project's wheel, built once per test session
    (tests/test_packaging.py installs and uses it; tests/test_readme.py checks its size)."""
    from test_packaging import build_wheel

    return build_wheel(tmp_path_factory)


@pytest.fixture(scope="session")
def tiny_nli(tmp_path_factory):
    """A 2-layer random classifier with MNLI labels (contradiction, neutral, entailment)."""
    from d2t_metrics.testing import make_tiny_classifier

    return make_tiny_classifier(str(tmp_path_factory.mktemp("tiny_nli")), model_type="roberta")


@pytest.fixture(scope="session")
def tiny_encoder(tmp_path_factory):
    from d2t_metrics.testing import make_tiny_encoder

    return make_tiny_encoder(str(tmp_path_factory.mktemp("tiny_encoder")))


@pytest.fixture(scope="session")
def tiny_seq2seq(tmp_path_factory):
    from d2t_metrics.testing import make_tiny_seq2seq

    return make_tiny_seq2seq(str(tmp_path_factory.mktemp("tiny_seq2seq")))


@pytest.fixture(scope="session")
def tiny_causal_lm(tmp_path_factory):
    """A 2-layer random Llama decoder: a stand-in base for d2t_metrics.generator."""
    from d2t_metrics.testing import make_tiny_causal_lm

    return make_tiny_causal_lm(str(tmp_path_factory.mktemp("tiny_causal_lm")))


@pytest.fixture()
def transformers_log():
    """Messages transformers logs while the test runs (its loggers do not
    propagate to the root logger, and its handler writes to the stderr of
    import time, so neither caplog nor capfd sees them)."""
    import logging

    records = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: records.append(record.getMessage())
    logger = logging.getLogger("transformers")
    logger.addHandler(handler)
    yield records
    logger.removeHandler(handler)


def write_dae_training_data(folder, nlp):
    """A tiny DAE training set in ``folder`` (train and dev): one arc-level swap
    (dog for cat, not entailed) and one identity, four times each."""
    import json

    from metrics.dae.arcs import doc_arcs
    from training.dae.make_data import _example

    rows = []
    for src, hyp, bad in [("The cat sat on the mat.", "The dog sat on the mat.", True), ("The cat sat on the mat.", "The cat sat on the mat.", False)]:
        d = nlp(hyp)
        arcs = doc_arcs(d)
        rows.append(_example(src, d, arcs, [0 if (bad and a.child == "dog") else 1 for a in arcs], "t", "t"))
    for split in ("train", "dev"):
        (folder / f"{split}.jsonl").write_text("\n".join(json.dumps(r) for r in rows * 4) + "\n")


def metric_path(name: str) -> str:
    return os.path.join(ROOT, "metrics", name)
