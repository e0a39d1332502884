"""Data-parallel scoring with accelerate: sharding, gathering, and a real 2-process CPU run."""

import json
import os
import socket
import subprocess
import sys
import textwrap

import pytest

from d2t_metrics.parallel import is_distributed_launch, score_in_parallel, shard_bounds

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.parametrize("n", [0, 1, 5, 11, 64])
@pytest.mark.parametrize("num_processes", [1, 2, 3, 8])
def test_shard_bounds_cover_input_once(n, num_processes):
    bounds = [shard_bounds(n, num_processes, rank) for rank in range(num_processes)]
    assert bounds[0][0] == 0 and bounds[-1][1] == n
    for (_, end), (start, _) in zip(bounds, bounds[1:]):
        assert end == start  # contiguous, no gap, no overlap
    sizes = [end - start for start, end in bounds]
    assert max(sizes) - min(sizes) <= 1
    assert sizes == sorted(sizes, reverse=True)  # the larger shards come first, as in accelerate


def test_shard_bounds_rejects_bad_rank():
    with pytest.raises(ValueError, match="bad rank 2 for 2 processes"):
        shard_bounds(10, 2, 2)


def test_is_distributed_launch(monkeypatch):
    for var in ("WORLD_SIZE", "ACCELERATE_NUM_PROCESSES"):
        monkeypatch.delenv(var, raising=False)
    assert not is_distributed_launch()
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert not is_distributed_launch()
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert is_distributed_launch()


def test_single_process_scores_in_input_order(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    items = ["bb", "a", "dddd", "ccc", ""]
    out = score_in_parallel(items, lambda batch: [s + "|" + str(len(batch)) for s in batch], batch_size=2, show_progress=False)
    assert [o.split("|")[0] for o in out] == items
    assert score_in_parallel([], lambda b: b, show_progress=False) == []
    with pytest.raises(ValueError, match="got 2 items but 1 lengths"):
        score_in_parallel(["a", "b"], lambda b: b, lengths=[1])


SCRIPT = textwrap.dedent(
    """
    import json, os, sys
    sys.path.insert(0, {root!r})
    from d2t_metrics.parallel import get_state, process_device, score_in_parallel

    state = get_state()
    items = [f"item{{i}}-" + "x" * (i % 7) for i in range(23)]

    def score(batch):
        return [{{"item": s, "rank": state.process_index, "length": len(s)}} for s in batch]

    out = score_in_parallel(items, score, batch_size=4, show_progress=False)
    with open(os.path.join(sys.argv[1], f"rank{{state.process_index}}.json"), "w") as f:
        json.dump({{"num_processes": state.num_processes, "device": process_device(state), "items": items, "out": out}}, f)
    state.destroy_process_group()
    """
)


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_two_cpu_processes_gather_in_input_order(tmp_path):
    """A real 2-process run over gloo on CPU, launched as users launch it (torchrun)."""
    script = tmp_path / "score.py"
    script.write_text(SCRIPT.format(root=ROOT), encoding="utf-8")
    env = dict(os.environ, ACCELERATE_USE_CPU="1", CUDA_VISIBLE_DEVICES="", OMP_NUM_THREADS="1")
    cmd = [
        sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
        "--master_addr", "127.0.0.1", "--master_port", str(_free_port()), "--log-dir", str(tmp_path / "torchrun_logs"),
        str(script), str(tmp_path),
    ]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    results = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in (0, 1)]
    for res in results:
        assert res["num_processes"] == 2
        assert res["device"] == "cpu"
        assert [o["item"] for o in res["out"]] == res["items"]  # input order
        assert [o["length"] for o in res["out"]] == [len(s) for s in res["items"]]
    # Every process ends with the same, full result list...
    assert results[0]["out"] == results[1]["out"]
    # ...made by both processes, each scoring its contiguous shard.
    ranks = [o["rank"] for o in results[0]["out"]]
    assert ranks == [0] * 12 + [1] * 11
