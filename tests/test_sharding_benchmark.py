"""benchmarks.sharding's plan of runs (the runs themselves are faked: they would load models)."""

import json

import pytest

from benchmarks import sharding


@pytest.fixture()
def fake_runs(monkeypatch):
    calls = []

    def score(metric, inp, out, processes, threads, block_lines, batch_size=None):
        calls.append((processes, threads, block_lines))
        with open(out, "w", encoding="utf-8") as f:
            f.write('{"id": 0, "m": {"score": 0.5}}\n')
        return 10.0 / processes, 8.0 / processes, json.dumps({"m": {"score": 0.5}})

    monkeypatch.setattr(sharding, "score", score)
    monkeypatch.setattr(sharding, "write_input", lambda path, n: n)
    monkeypatch.setattr(sharding, "check_splits", lambda metric: None)
    return calls


def test_the_default_plan_compares_shards_with_one_thread_and_with_torchs_threads(fake_runs, capsys):
    assert sharding.main(["--examples", "4", "--processes", "2", "--block-lines", "2"]) == 0
    assert fake_runs == [(1, None, 2), (1, 1, 2), (2, None, 2), (1, None, 0)]
    out = capsys.readouterr().out
    assert "2 processes (1 thread each), against one process with 1 thread: output **byte-identical**" in out


def test_threads_gives_every_process_of_every_run_as_many(fake_runs, capsys):
    assert sharding.main(["--examples", "4", "--processes", "2", "--block-lines", "2", "--threads", "4"]) == 0
    assert fake_runs == [(1, 4, 2), (2, 4, 2), (1, 4, 0)]
    out = capsys.readouterr().out
    assert "--threads 4`" in out
    assert "2 processes against one process with their thread count (4): 2.00x (wall), 2.00x (scoring)" in out
    assert "2 processes (4 threads each), against one process with as many threads: output **byte-identical**" in out


@pytest.mark.parametrize("bad", ["0", "-2"])
def test_threads_below_one_are_refused_before_anything_runs(fake_runs, capsys, bad):
    with pytest.raises(SystemExit) as exit_:
        sharding.main(["--threads", bad])
    assert exit_.value.code == 2 and "--threads must be >= 1" in capsys.readouterr().err and fake_runs == []
