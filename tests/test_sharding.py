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
# Joining the work (the blocks each process scores: tests/test_blocks.py)


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


# ---------------------------------------------------------------------------
# Real 2-process runs (gloo on CPU), against a single process

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
    """A metrics folder (parent, NLI and a plain module), a tiny NLI model and 19 input lines."""
    root = tmp_path_factory.mktemp("sharding")
    metrics = root / "metrics"
    for name in ("parent", "nli_semantic_accuracy"):
        shutil.copytree(os.path.join(ROOT, "metrics", name), metrics / name, ignore=shutil.ignore_patterns("__pycache__"))
    (metrics / "plain").mkdir()
    (metrics / "plain" / "plain.py").write_text(textwrap.dedent(PLAIN), encoding="utf-8")
    from d2t_metrics.testing import make_tiny_classifier

    # hidden size 128: large enough that an example's numbers move with the batch it is padded in (22 of
    # the 449 numbers of these lines, scored whole or in two parts, on the 2-core CI machine's CPU type)
    model = make_tiny_classifier(str(root / "tiny_nli"), model_type="roberta", hidden_size=128)
    with open(EXAMPLES, encoding="utf-8") as f:
        lines = [line for line in f if line.strip()][:19]  # odd: shards of 10 and 9
    inp = root / "in.jsonl"
    inp.write_text("".join(lines), encoding="utf-8")
    return {"metrics": str(metrics), "model": model, "input": str(inp), "root": root}


def _score_args(setup, output):
    return ["score", "--metrics", "parent,nli_semantic_accuracy,plain", "--metrics-dir", setup["metrics"],
            "--model", f"nli_semantic_accuracy={setup['model']}", "--input", setup["input"], "--output", str(output),
            "--json", "--no-progress", "--with-input",
            # blocks of 3 lines and the default batches: shards of 9 and 10 lines, their batches padded as
            # in the single process (the test's 19 lines would be one block by default)
            "--block-lines", "3"]


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
                "--master_port", str(_free_port()), "--log-dir", str(root / "torchrun_logs"), "-m", "d2t_metrics.cli"]
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
