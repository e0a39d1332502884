"""The command line scores a metric in blocks of lines (d2t_metrics.blocks): the arithmetic of
blocks and shards, and a run in blocks against a run in one call."""

import json
import os
import textwrap

import pytest

from d2t_metrics import blocks
from d2t_metrics import runner
from d2t_metrics.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# A D2TMetric that records its compute() calls and model loads in a file, says how its corpus
# score follows from the per-example ones, and refuses a prediction "BAD" as the metrics refuse
# bad input: in its checks, before anything is stored or loaded, naming the example.
COUNTING = '''
import json
import os

import datasets
import evaluate

from d2t_metrics.metric import D2TMetric

def log(event, **fields):
    with open(os.environ["COUNTING_LOG"], "a", encoding="utf-8") as f:
        f.write(json.dumps({"event": event, **fields}) + "\\n")


class Counting(D2TMetric):
    CHECKPOINT = "counting"

    def __init__(self, model=None, dtype=None, **kwargs):
        super().__init__(**kwargs)
        self.model_name, self.dtype = model, dtype

    def _info(self):
        return evaluate.MetricInfo(description="counting", citation="", inputs_description="",
                                   features=self.declared_features())

    def _check_call(self, inputs, options):
        for i, p in enumerate(inputs["predictions"]):
            if p == "BAD":
                raise ValueError(f"example {i}: prediction is BAD")

    def load_model(self):
        log("load")

    def _compute(self, predictions, per_example=False, show_progress=True, batch_size=None):
        if os.environ.get("COUNTING_BOOM") and "BOOM" in predictions:
            raise RuntimeError("boom")  # a crash in the middle of a run
        log("compute", n=len(predictions), show_progress=show_progress)
        examples = [{"length": len(p), "call_size": len(predictions)} for p in predictions]
        out = self.corpus_scores(examples)
        if per_example:
            out["examples"] = examples
        return out

    def corpus_scores(self, examples):
        return {"mean_length": sum(e["length"] for e in examples) / len(examples)}
'''


# A plain evaluate module that always fails.
BROKEN = '''
import datasets
import evaluate


class Broken(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(description="", citation="", inputs_description="",
                                   features=datasets.Features({"predictions": datasets.Value("string")}))

    def _compute(self, predictions, per_example=False):
        raise RuntimeError("broken")
'''


# ---------------------------------------------------------------------------
# The arithmetic


@pytest.mark.parametrize("n,size", [(0, 3), (1, 3), (7, 3), (9, 3), (7, 0), (256, 256), (257, 256)])
def test_blocks_cover_the_lines_once_in_order(n, size):
    bounds = blocks.block_bounds(0, n, size)
    assert [line for s, e in bounds for line in range(s, e)] == list(range(n))
    assert all(0 < e - s <= (size or n) for s, e in bounds)
    assert len(bounds) == (0 if n == 0 else 1 if size == 0 else -(-n // size))


def test_a_shards_blocks_are_the_whole_inputs_blocks():
    assert blocks.block_bounds(6, 11, 3) == [(6, 9), (9, 11)]
    assert blocks.block_bounds(0, 11, 3)[2:] == [(6, 9), (9, 11)]
    with pytest.raises(ValueError, match="line 5 does not begin a block of 3 lines"):
        blocks.block_bounds(5, 11, 3)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "64", None])
def test_a_bad_block_size_is_refused(bad):
    with pytest.raises(ValueError, match="block lines must be an integer >= 0"):
        blocks.check_block_lines(bad)


@pytest.mark.parametrize("n", [0, 1, 5, 19, 64, 400, 2230, 10_001])
@pytest.mark.parametrize("size", [0, 1, 5, 64, 256])
@pytest.mark.parametrize("processes", [1, 2, 3, 8])
def test_shards_are_whole_blocks_that_share_the_lines_evenly(n, size, processes):
    shards = [blocks.shard_lines(n, size, processes, rank) for rank in range(processes)]
    assert shards[0][0] == 0 and shards[-1][1] == n
    assert all(a[1] == b[0] for a, b in zip(shards, shards[1:]))  # contiguous, in rank order
    assert all(s <= e for s, e in shards)
    if size:
        assert all(s % size == 0 for s, e in shards if s < n)  # each begins a block
        assert all(abs((e - s) - n / processes) <= size for s, e in shards)  # within a block of an even share
    else:
        assert sorted(e - s for s, e in shards)[-1] == n  # one block: one process scores it


def test_a_shard_of_the_arguments_cuts_the_per_example_ones_only():
    kwargs = {"predictions": ["p0", "p1", "p2"], "tables": ["t0", "t1", "t2"], "references": [["r0"], ["r1"], ["r2"]],
              "sources": None, "per_example": True, "show_progress": True, "batch_size": 4, "weights": [1, 2, 3]}
    assert blocks.block_arguments(kwargs, 1, 3) == {
        "predictions": ["p1", "p2"], "tables": ["t1", "t2"], "references": [["r1"], ["r2"]], "sources": None,
        "per_example": True, "show_progress": True, "batch_size": 4, "weights": [1, 2, 3]}
    assert kwargs["predictions"] == ["p0", "p1", "p2"]  # the plan is left as it was


def test_the_per_example_arguments_are_the_command_lines_input_columns():
    assert set(blocks.PER_EXAMPLE_ARGUMENTS) == {"predictions", *runner.INPUT_FIELDS}


def test_a_blocks_example_indices_become_the_inputs():
    assert blocks.global_indices("example 0: bad; example 2: worse (example 9)", 10) == "example 10: bad; example 12: worse (example 9)"


class _Means:
    def corpus_scores(self, examples):
        return {}


def test_only_a_metric_that_defines_its_corpus_scores_is_cut_into_blocks():
    cls, _ = runner.load_metric_class(os.path.join(ROOT, "metrics", "parent"))

    class Split(cls):
        def corpus_scores(self, examples):
            return {}

    assert blocks.splits_exactly(Split())
    assert "corpus_scores" in vars(cls) and blocks.splits_exactly(cls())  # every shipped metric defines it
    assert not blocks.splits_exactly(_Means())  # not a D2TMetric: its scores' meaning is unknown


# ---------------------------------------------------------------------------
# A run in blocks


@pytest.fixture()
def counting(tmp_path, monkeypatch):
    (tmp_path / "metrics" / "counting").mkdir(parents=True)
    (tmp_path / "metrics" / "counting" / "counting.py").write_text(textwrap.dedent(COUNTING), encoding="utf-8")
    (tmp_path / "checkpoints" / "counting").mkdir(parents=True)
    (tmp_path / "metrics" / "broken").mkdir(parents=True)
    (tmp_path / "metrics" / "broken" / "broken.py").write_text(textwrap.dedent(BROKEN), encoding="utf-8")
    log = tmp_path / "log.jsonl"
    monkeypatch.setenv("COUNTING_LOG", str(log))

    def score(predictions, *options, output="out.jsonl", metrics="counting"):
        inp = tmp_path / "in.jsonl"
        inp.write_text("".join(json.dumps({"prediction": p}) + "\n" for p in predictions), encoding="utf-8")
        out = tmp_path / output
        if log.exists():
            log.unlink()
        code = main(["score", "--metrics", metrics, "--metrics-dir", str(tmp_path / "metrics"), "--input", str(inp),
                     "--output", str(out), "--json", *options])
        events = [json.loads(line) for line in log.read_text(encoding="utf-8").splitlines()] if log.exists() else []
        written = [json.loads(line)["counting"] for line in out.read_text(encoding="utf-8").splitlines()] if out.exists() else None
        return code, events, written

    return score


def test_a_metric_is_computed_block_by_block_and_joined_in_order(counting, capsys):
    predictions = [f"text {'x' * i}" for i in range(7)]
    code, events, written = counting(predictions, "--block-lines", "3", "--overwrite")
    assert code == 0
    assert [e["event"] for e in events] == ["load", "compute", "compute", "compute"]  # one load, one call per block
    assert [e["n"] for e in events[1:]] == [3, 3, 1]
    assert [w["length"] for w in written] == [len(p) for p in predictions]
    assert [w["call_size"] for w in written] == [3, 3, 3, 3, 3, 3, 1]
    scores = json.loads(capsys.readouterr().out)["counting"]
    assert scores == {"mean_length": sum(map(len, predictions)) / 7}  # the whole input's, from the joined examples


def test_default_block_lines_are_gpu_sized_in_one_process_on_a_gpu(monkeypatch):
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert blocks.default_block_lines(sharded=False) == blocks.GPU_BLOCK_LINES == 1024
    assert blocks.default_block_lines(sharded=True) == blocks.BLOCK_LINES == 256  # a sharded run deals out blocks
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert blocks.default_block_lines(sharded=False) == 256


@pytest.mark.parametrize("gpu, calls", [(False, [256, 256, 88]), (True, [600])])
def test_the_command_line_default_block_follows_the_device(counting, monkeypatch, gpu, calls):
    import d2t_metrics.cli as cli

    # (the metrics themselves would choose the GPU torch reports: only the block choice sees one here)
    monkeypatch.setattr(cli, "default_block_lines", lambda sharded: blocks.GPU_BLOCK_LINES if gpu and not sharded else 256)
    code, events, _ = counting([f"t{i}" for i in range(600)], "--overwrite")
    assert code == 0 and [e["n"] for e in events if e["event"] == "compute"] == calls


def test_block_lines_0_computes_the_whole_input_at_once(counting):
    code, events, written = counting(["a", "bb", "ccc"], "--block-lines", "0", "--overwrite")
    assert code == 0 and [e["n"] for e in events if e["event"] == "compute"] == [3]
    assert [w["call_size"] for w in written] == [3, 3, 3]


def test_in_blocks_the_metrics_own_progress_bars_give_way_to_one_over_the_lines(counting, capsys):
    code, events, _ = counting(["a", "bb", "ccc"], "--block-lines", "2", "--overwrite")
    assert code == 0 and {e["show_progress"] for e in events if e["event"] == "compute"} == {False}
    assert "counting: lines" in capsys.readouterr().err
    code, events, _ = counting(["a", "bb", "ccc"], "--block-lines", "2", "--no-progress", "--overwrite")
    assert code == 0 and {e["show_progress"] for e in events if e["event"] == "compute"} == {False}
    assert "counting: lines" not in capsys.readouterr().err


@pytest.mark.parametrize("size", ["2", "0"])
def test_a_bad_line_is_refused_before_the_model_loads(counting, capsys, size):
    code, events, _ = counting(["a", "b", "c", "d", "BAD", "f"], "--block-lines", size, "--overwrite")
    assert code == 1 and events == []  # nothing loaded, nothing computed
    assert "counting failed: it rejected the input: line 5 (example 4): prediction is BAD" in capsys.readouterr().err


def test_a_negative_block_size_is_a_usage_error(counting, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["score", "--input", "x.jsonl", "--block-lines", "-1"])
    assert exit_.value.code == 2 and "--block-lines must be >= 0" in capsys.readouterr().err


# ---------------------------------------------------------------------------
# A stopped run, resumed (d2t_metrics.resume)

LINES = [f"line {'x' * i}" for i in range(7)]  # blocks of 2: [0, 2) [2, 4) [4, 6) [6, 7)


def _computed_sizes(events):
    return [e["n"] for e in events if e["event"] == "compute"]


def test_a_crashed_run_keeps_its_finished_blocks_and_resume_goes_on_from_them(counting, tmp_path, monkeypatch, capsys):
    code, _, whole = counting(LINES, "--block-lines", "2", output="whole.jsonl")
    assert code == 0 and not (tmp_path / "whole.jsonl.blocks").exists()  # a finished run keeps no blocks
    monkeypatch.setenv("COUNTING_BOOM", "1")
    crashing = LINES[:5] + ["BOOM"] + LINES[6:]  # the third block crashes
    code, events, _ = counting(crashing, "--block-lines", "2")
    assert code == 1 and _computed_sizes(events) == [2, 2]
    err = capsys.readouterr().err
    assert f"2 finished block(s) kept in {tmp_path / 'out.jsonl.blocks'}: the same command with --resume" in err
    monkeypatch.delenv("COUNTING_BOOM")  # the crash was the machine's, not the input's: the same input again
    code, events, _ = counting(crashing, "--block-lines", "2", "--resume")
    assert code == 0 and _computed_sizes(events) == [2, 1]  # only the blocks the crash cut off
    assert "counting: 2 of 4 block(s) read back" in capsys.readouterr().err
    assert not (tmp_path / "out.jsonl.blocks").exists()
    code, _, fresh = counting(crashing, "--block-lines", "2", output="fresh.jsonl")
    assert (tmp_path / "out.jsonl").read_bytes() == (tmp_path / "fresh.jsonl").read_bytes()  # as if it had not stopped


def _stop_after_two_blocks(counting, monkeypatch):
    monkeypatch.setenv("COUNTING_BOOM", "1")
    assert counting(LINES[:4] + ["BOOM"] + LINES[5:], "--block-lines", "2", "--overwrite")[0] == 1
    monkeypatch.delenv("COUNTING_BOOM")


def test_a_block_is_read_back_only_for_the_same_lines_and_options(counting, monkeypatch):
    _stop_after_two_blocks(counting, monkeypatch)
    changed = ["changed"] + LINES[1:4] + ["BOOM"] + LINES[5:]  # the first block's input changed
    code, events, written = counting(changed, "--block-lines", "2", "--resume")
    assert code == 0 and _computed_sizes(events) == [2, 2, 1]  # the second block read back, the others scored
    assert written[0]["length"] == len("changed")
    _stop_after_two_blocks(counting, monkeypatch)
    code, events, _ = counting(LINES[:4] + ["BOOM"] + LINES[5:], "--block-lines", "2", "--resume", "--batch-size", "8")
    assert code == 0 and _computed_sizes(events) == [2, 2, 2, 1]  # another batch size: another result


def test_a_block_is_read_back_only_in_the_same_arithmetic(counting, monkeypatch):
    _stop_after_two_blocks(counting, monkeypatch)  # float32
    code, events, _ = counting(LINES[:4] + ["BOOM"] + LINES[5:], "--block-lines", "2", "--resume", "--dtype", "bfloat16")
    assert code == 0 and _computed_sizes(events) == [2, 2, 2, 1]  # other arithmetic, other numbers: none read back


def test_without_resume_the_kept_blocks_are_not_read(counting, monkeypatch, tmp_path):
    _stop_after_two_blocks(counting, monkeypatch)
    code, events, _ = counting(LINES, "--block-lines", "2", "--overwrite")
    assert code == 0 and _computed_sizes(events) == [2, 2, 2, 1] and not (tmp_path / "out.jsonl.blocks").exists()


def test_a_cut_short_block_file_is_scored_again(counting, monkeypatch, tmp_path):
    _stop_after_two_blocks(counting, monkeypatch)
    [first, second] = sorted((tmp_path / "out.jsonl.blocks").iterdir())
    first.write_text(first.read_text(encoding="ascii")[:20], encoding="ascii")  # the stop came mid-write
    code, events, _ = counting(LINES, "--block-lines", "2", "--resume")
    assert code == 0 and _computed_sizes(events) == [2, 2, 1]


def test_a_metric_whose_blocks_are_all_kept_loads_no_model(counting, tmp_path, capsys):
    code, events, _ = counting(LINES, "--block-lines", "2", metrics="counting,broken")
    assert code == 1 and _computed_sizes(events) == [2, 2, 2, 1]  # counting ran whole; broken failed: blocks kept
    code, events, written = counting(LINES, "--block-lines", "2", "--resume", metrics="counting")
    assert code == 0 and events == []  # every block read back: no model loaded, nothing computed
    assert [w["length"] for w in written] == [len(p) for p in LINES]
    assert "counting: 4 of 4 block(s) read back" in capsys.readouterr().err


def test_resume_needs_the_output_and_one_process(counting, tmp_path, capsys, monkeypatch):
    code = main(["score", "--metrics", "counting", "--metrics-dir", str(tmp_path / "metrics"), "--input", "x.jsonl", "--resume"])
    assert code == 2 and "--resume reads the blocks kept beside --output" in capsys.readouterr().err
    for key, value in {"RANK": "0", "WORLD_SIZE": "2", "LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "29500"}.items():
        monkeypatch.setenv(key, value)
    code = main(["score", "--metrics", "counting", "--metrics-dir", str(tmp_path / "metrics"), "--input", "x.jsonl",
                 "--output", str(tmp_path / "o.jsonl"), "--resume"])
    assert code == 2 and "--resume works in one process" in capsys.readouterr().err


def test_a_file_where_the_blocks_go_is_a_usage_error(counting, tmp_path, capsys):
    (tmp_path / "out.jsonl.blocks").write_text("not a folder", encoding="utf-8")
    code, events, _ = counting(LINES, "--block-lines", "2")
    assert code == 2 and events == []
    assert "out.jsonl.blocks exists and is not a folder" in capsys.readouterr().err


def test_blocks_that_cannot_be_kept_cost_the_resume_not_the_run(counting, tmp_path, monkeypatch, capsys):
    from d2t_metrics import cli
    from d2t_metrics.resume import BlockStore

    def full_disk(path, chunks):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cli, "block_store", lambda args, launch: BlockStore.for_output(args.output, args.resume, full_disk))
    code, events, written = counting(LINES, "--block-lines", "2")
    err = capsys.readouterr().err
    assert code == 0 and _computed_sizes(events) == [2, 2, 2, 1]  # every block scored, the output written
    assert [w["length"] for w in written] == [len(p) for p in LINES]
    assert err.count("warning: cannot keep finished blocks") == 1 and "No space left on device" in err
