"""``d2t-metrics score`` sharded over processes (d2t_metrics.sharding): the pieces, and real
2-process CPU runs under torchrun whose output must be byte-identical to a single process's."""

import json
import os
import shutil
import socket
import subprocess
import sys
import textwrap

import pytest

from d2t_metrics import runner
from d2t_metrics import sharding
from d2t_metrics.runner import UsageError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples", "examples.jsonl")
LAUNCH = {"RANK": "1", "WORLD_SIZE": "2", "LOCAL_RANK": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}


# ---------------------------------------------------------------------------
# Reading the launch


def test_a_plain_run_is_no_launch():
    assert sharding.launch_from_env({}) is None
    assert sharding.launch_from_env({**LAUNCH, "WORLD_SIZE": "1", "RANK": "0"}) is None


def test_the_launch_is_read_from_torchrun_and_accelerate_variables():
    launch = sharding.launch_from_env(LAUNCH)
    assert launch == sharding.Launch(rank=1, world_size=2, local_rank=1) and not launch.is_main
    assert sharding.launch_from_env({**LAUNCH, "RANK": "0"}).is_main


@pytest.mark.parametrize("change,fragment", [
    ({"RANK": None}, "RANK not set"),
    ({"MASTER_ADDR": None, "MASTER_PORT": None}, "MASTER_ADDR, MASTER_PORT not set"),
    ({"RANK": "x"}, "must be integers"),
    ({"RANK": "2"}, "bad launch: RANK=2"),
])
def test_a_broken_launch_is_a_usage_error(change, fragment):
    environ = {k: v for k, v in {**LAUNCH, **change}.items() if v is not None}
    with pytest.raises(UsageError, match=fragment):
        sharding.launch_from_env(environ)


# ---------------------------------------------------------------------------
# Cutting the work


def _corpus(n=5):
    rows = [{"id": f"x{i}", "prediction": f"p{i}", "references": [f"r{i}"], "table": f"A | p | B{i}"} for i in range(n)]
    return runner.parse_corpus("\n".join(json.dumps(r) for r in rows), "in.jsonl")


def test_a_shard_holds_its_lines_and_their_line_numbers():
    shard = sharding.corpus_slice(_corpus(), 3, 5)
    assert shard.ids == ["x3", "x4"] and shard.predictions == ["p3", "p4"] and shard.tables == ["A | p | B3", "A | p | B4"]
    assert shard.references == [["r3"], ["r4"]] and shard.sources is None and shard.line_numbers == [4, 5]


def test_a_shard_cuts_the_per_example_arguments_only():
    corpus = _corpus()
    prepared = runner.PreparedMetric(name="m", metric=None, config=None, model=None, kwargs={
        "predictions": corpus.predictions, "tables": corpus.tables, "references": corpus.references,
        "per_example": True, "show_progress": True, "batch_size": 4, "weights": [1, 2]})
    shard = sharding.shard_of(prepared, 1, 3, show_progress=False)
    assert shard.kwargs == {"predictions": ["p1", "p2"], "tables": ["A | p | B1", "A | p | B2"], "references": [["r1"], ["r2"]],
                            "per_example": True, "show_progress": False, "batch_size": 4, "weights": [1, 2]}
    assert prepared.kwargs["predictions"] == corpus.predictions  # the whole plan is left as it was
    assert sharding.shard_of(prepared, 0, 2, show_progress=True).kwargs["show_progress"] is True


def test_a_shards_example_indices_become_the_inputs():
    assert sharding.global_indices("example 0: bad; example 2: worse (example 9)", 10) == "example 10: bad; example 12: worse (example 9)"


class _Means:
    name = "m"

    def corpus_scores(self, examples):
        return {"mean": sum(e["s"] for e in examples) / len(examples), "nested": {"n": len(examples)}}


def _prepared():
    return runner.PreparedMetric(name="m", metric=_Means(), config=None, model="tiny", kwargs={})


def test_rank_0_joins_the_shards_in_order_and_scores_the_whole(capsys):
    outcome = runner.Outcome()
    sharding.record(_prepared(), [("ran", [{"s": 0.1}, {"s": 0.2}]), ("ran", [{"s": 0.7}])], outcome)
    [run] = outcome.runs
    assert run.examples == [{"s": 0.1}, {"s": 0.2}, {"s": 0.7}]
    assert run.scores == {"mean": (0.1 + 0.2 + 0.7) / 3, "nested.n": 3} and run.model == "tiny"


def test_a_metric_failed_or_skipped_in_one_process_is_failed_or_skipped(capsys):
    outcome = runner.Outcome()
    sharding.record(_prepared(), [("ran", [{"s": 1.0}]), ("failed", "it rejected the input: line 9 (example 8): bad")], outcome)
    assert outcome.failed == ["m"] and not outcome.runs
    assert "d2t-metrics: error: m failed (process 1): it rejected the input: line 9 (example 8): bad" in capsys.readouterr().err
    outcome = runner.Outcome()
    sharding.record(_prepared(), [("skipped", "a library is missing"), ("ran", [])], outcome)
    assert outcome.skipped == ["m"] and not outcome.runs
    assert "skipped m: a library is missing (process 0)" in capsys.readouterr().err


def test_only_a_metric_that_defines_its_corpus_scores_is_split():
    cls, _ = runner.load_metric_class(os.path.join(ROOT, "metrics", "parent"))

    class Split(cls):
        def corpus_scores(self, examples):
            return {}

    assert sharding.splits_exactly(Split())
    assert sharding.splits_exactly(cls()) == ("corpus_scores" in vars(cls))
    assert not sharding.splits_exactly(_Means())  # not a D2TMetric: its scores' meaning is unknown


# ---------------------------------------------------------------------------
# Real 2-process runs (gloo on CPU), against a single process

# The corpus scores of PARENT and NLI, as their _compute makes them from the per-example dicts;
# appended to copies of the metrics when their own files do not define corpus_scores yet.
OVERRIDES = {
    "parent": "Parent.corpus_scores = lambda self, examples: corpus_scores(examples)\n",
    "nli_semantic_accuracy": "NLISemanticAccuracy.corpus_scores = lambda self, examples: corpus_summary(examples)\n",
}

# An evaluate module that says nothing of its corpus scores: scored whole by rank 0.
PLAIN = '''
import datasets
import evaluate


class Plain(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(description="", citation="", inputs_description="",
                                   features=datasets.Features({"predictions": datasets.Value("string")}))

    def _compute(self, predictions, per_example=False):
        lengths = [len(p) for p in predictions]
        return {"mean_length": sum(lengths) / len(lengths), "examples": [{"length": n} for n in lengths]}
'''


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def sharded_setup(tmp_path_factory):
    """A metrics folder (parent and NLI with corpus_scores, a plain module), a tiny NLI model and 19 input lines."""
    root = tmp_path_factory.mktemp("sharding")
    metrics = root / "metrics"
    for name, override in OVERRIDES.items():
        shutil.copytree(os.path.join(ROOT, "metrics", name), metrics / name, ignore=shutil.ignore_patterns("__pycache__"))
        main = metrics / name / f"{name}.py"
        if "def corpus_scores(self" not in main.read_text(encoding="utf-8"):
            with open(main, "a", encoding="utf-8") as f:
                f.write("\n\n" + override)
    (metrics / "plain").mkdir()
    (metrics / "plain" / "plain.py").write_text(textwrap.dedent(PLAIN), encoding="utf-8")
    from d2t_metrics.testing import make_tiny_classifier

    model = make_tiny_classifier(str(root / "tiny_nli"), model_type="roberta")
    with open(EXAMPLES, encoding="utf-8") as f:
        lines = [line for line in f if line.strip()][:19]  # odd: shards of 10 and 9
    inp = root / "in.jsonl"
    inp.write_text("".join(lines), encoding="utf-8")
    return {"metrics": str(metrics), "model": model, "input": str(inp), "root": root}


def _score_args(setup, output):
    return ["score", "--metrics", "parent,nli_semantic_accuracy,plain", "--metrics-dir", setup["metrics"],
            "--model", f"nli_semantic_accuracy={setup['model']}", "--input", setup["input"], "--output", str(output),
            "--json", "--no-progress", "--with-input",
            # A float32 model's probabilities move in the 8th digit with the batch an example is padded in
            # (#38), and a shard's batches are not the whole's: one example per batch keeps them identical.
            "--batch-size", "1"]


def _env():
    return dict(os.environ, CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", D2T_NO_PROGRESS="1",
                PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))


@pytest.mark.slow
def test_two_processes_write_the_single_process_output(sharded_setup):
    setup, root = sharded_setup, sharded_setup["root"]
    single = subprocess.run([sys.executable, "-m", "d2t_metrics.cli", *_score_args(setup, root / "single.jsonl")],
                            env=_env(), cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert single.returncode == 0, single.stderr[-3000:]
    launcher = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", "--master_addr", "127.0.0.1",
                "--master_port", str(_free_port()), "-m", "d2t_metrics.cli"]
    sharded = subprocess.run([*launcher, *_score_args(setup, root / "sharded.jsonl")],
                             env=_env(), cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert sharded.returncode == 0, sharded.stdout[-3000:] + sharded.stderr[-3000:]
    # parent and NLI were split over both processes; the plain module was scored whole by rank 0
    assert "running parent on 2 processes" in sharded.stderr
    assert "running nli_semantic_accuracy with model" in sharded.stderr and "on 2 processes" in sharded.stderr
    assert "plain does not say how its corpus scores follow" in sharded.stderr
    # one output, byte for byte the single process's, and the same corpus scores
    assert (root / "sharded.jsonl").read_bytes() == (root / "single.jsonl").read_bytes()
    assert len((root / "single.jsonl").read_bytes().splitlines()) == 19
    assert sharded.stdout == single.stdout and json.loads(sharded.stdout)["parent"]  # only rank 0 printed
