"""benchmarks.profile: stage tables from d2t_metrics.timing, GNU time's report, the stored results,
and a run end to end on a model-free metric. No wall-clock assertions: stage counts and structure."""

import os
import subprocess
import sys

import pytest

from benchmarks import profile as pf
from d2t_metrics.timing import reset, stage

TIME_V = """\tCommand being timed: "d2t-metrics score --input examples/examples.jsonl"
\tUser time (seconds): 136.04
\tSystem time (seconds): 9.12
\tPercent of CPU this job got: 170%
\tElapsed (wall clock) time (h:mm:ss or m:ss): 1:25.31
\tMaximum resident set size (kbytes): 3012345
\tExit status: 0
"""


def test_parse_time_verbose_reads_cpu_wall_and_memory():
    figures = pf.parse_time_verbose("some program output\n" + TIME_V)
    assert figures["user_seconds"] == 136.04 and figures["system_seconds"] == 9.12
    assert figures["cpu_seconds"] == pytest.approx(145.16)
    assert figures["wall_seconds"] == pytest.approx(85.31)
    assert figures["max_rss_kb"] == 3012345 and figures["exit_status"] == 0


def test_clock_seconds_reads_hours_minutes_and_seconds():
    assert pf._clock_seconds("1:02:03.5") == pytest.approx(3723.5)
    assert pf._clock_seconds("0:07.25") == pytest.approx(7.25)


@pytest.mark.skipif(not os.path.exists("/usr/bin/time"), reason="GNU time is not installed")
def test_parse_time_verbose_reads_gnu_times_real_report():
    done = subprocess.run(["/usr/bin/time", "-v", sys.executable, "-c", "pass"], capture_output=True, text=True)
    figures = pf.parse_time_verbose(done.stderr)
    assert {"user_seconds", "system_seconds", "cpu_seconds", "wall_seconds", "max_rss_kb"} <= set(figures)
    assert figures["exit_status"] == 0 and figures["max_rss_kb"] > 0


def test_stage_rows_add_the_time_outside_any_stage():
    totals = {("parse",): (1.0, 2), ("model",): (3.0, 1), ("model", "generate"): (2.5, 4)}
    rows = pf.stage_rows(totals, wall_seconds=5.0)
    by_stage = {tuple(r["stage"]): r for r in rows}
    assert by_stage[("model", "generate")]["calls"] == 4
    assert by_stage[("model",)]["share"] == pytest.approx(0.6)
    # Only outermost stages count against the wall clock: 5 - (1 + 3).
    assert by_stage[(pf.OUTSIDE,)]["seconds"] == pytest.approx(1.0)
    # Stages timed in other threads may sum past the wall clock: never a negative rest.
    assert pf.stage_rows({("a",): (6.0, 1)}, 5.0)[-1]["seconds"] == 0.0


def test_stages_are_displayed_under_their_parents():
    rows = pf.stage_rows({("a",): (1.0, 1), ("b",): (1.0, 1), ("a", "x"): (0.5, 1), ("b", "y"): (0.2, 1), ("a", "x", "z"): (0.1, 1)}, 3.0)
    order = [tuple(r["stage"]) for r in pf.ordered_for_display(rows)]
    assert order == [("a",), ("a", "x"), ("a", "x", "z"), ("b",), ("b", "y"), (pf.OUTSIDE,)]


def test_store_merges_records_and_render_reports_the_cli_target(tmp_path):
    path = str(tmp_path / "meta_eval" / "profile.json")
    stages = pf.stage_rows({("answering",): (2.0, 3)}, 4.0)
    rec = {"metric": "dae", "device": "cpu", "date": "d", "commit": "c", "command": "python -m benchmarks.profile",
           "load_average_before": 1.0, "load_average_after": 1.5, "hardware_text": "CPU X, 2 cores",
           "load": {"seconds": 3.0, "cpu_seconds": 2.0, "stages": pf.stage_rows({}, 3.0)},
           "runs": {"examples/examples.jsonl": {"n": 20, "seconds": 4.0, "cpu_seconds": 3.5, "stages": stages, "examples_per_second": 5.0}}}
    pf.store(path, pf.record_key("dae", "cpu"), rec)
    pf.store(path, pf.record_key("nli_semantic_accuracy", "cpu"), dict(rec, metric="nli_semantic_accuracy"))
    pf.store(path, pf.record_key("dae", "cpu"), dict(rec, commit="newer"))
    cli = {"command": "/usr/bin/time -v d2t-metrics score ...", "date": "d", "load_average_before": 1.0, "load_average_after": 2.0,
           "user_seconds": 100.0, "system_seconds": 25.0, "cpu_seconds": 125.0, "wall_seconds": 80.0, "max_rss_kb": 3e6,
           "returncode": 0, "metrics_run": ["parent", "dae"]}
    data = pf.store(path, "cpu", cli, group="cli")
    assert set(data["records"]) == {"dae|cpu", "nli_semantic_accuracy|cpu"}
    assert data["records"]["dae|cpu"]["commit"] == "newer"
    md = pf.render(pf.load_results(path))
    assert "**125.0 CPU-s** (target ≤ 120: **FAIL**)" in md
    assert "answering" in md and pf.OUTSIDE in md and "CPU X, 2 cores" in md
    assert "**PASS**" in pf.render({"records": {}, "cli": {"cpu": dict(cli, cpu_seconds=119.0)}})
    assert "**FAIL**" in pf.render({"records": {}, "cli": {"cpu": dict(cli, cpu_seconds=10.0, returncode=1)}})


def _prepared_parent():
    from d2t_metrics.runner import find_checkpoints_dir, find_metrics_dir, prepare_metric, read_corpus

    corpus = read_corpus(pf.EXAMPLES)
    metrics_dir = find_metrics_dir()
    return prepare_metric("parent", os.path.join(metrics_dir, "parent"), None, None,
                          find_checkpoints_dir(None, metrics_dir), corpus, None, False), corpus


def test_profile_metric_reads_the_stages_of_loading_and_of_each_compute_apart():
    prepared, corpus = _prepared_parent()
    metric = prepared.metric
    original_prepare, original_compute = metric.download_and_prepare, metric.compute

    def prepare():
        with stage("loading the model"):
            original_prepare()

    def compute(**kwargs):
        with stage("scoring"):
            for _ in range(3):
                with stage("tokenizing"):
                    pass
            return original_compute(**kwargs)

    metric.download_and_prepare, metric.compute = prepare, compute
    reset()
    record = pf.profile_metric(prepared, [("first", corpus), ("second", corpus)])
    load_stages = {tuple(r["stage"]): r["calls"] for r in record["load"]["stages"]}
    assert load_stages == {("loading the model",): 1, (pf.OUTSIDE,): None}
    for name in ("first", "second"):
        run = record["runs"][name]
        assert run["n"] == run["returned"] == 20
        # Reset between loading and each compute: each run holds its own calls only.
        assert {tuple(r["stage"]): r["calls"] for r in run["stages"]} == {("scoring",): 1, ("scoring", "tokenizing"): 3, (pf.OUTSIDE,): None}


def test_measure_cli_runs_the_command_under_gnu_time(monkeypatch):
    if not os.path.exists("/usr/bin/time"):
        pytest.skip("GNU time is not installed")
    script = "import sys; print('d2t-metrics: running parent', file=sys.stderr); print('d2t-metrics: skipped dae: no model', file=sys.stderr)"
    monkeypatch.setattr(pf, "cli_command", lambda output: [sys.executable, "-c", script])
    rec = pf.measure_cli(dict(os.environ))
    assert rec["returncode"] == 0 and rec["metrics_run"] == ["parent"] and rec["skipped"] == ["d2t-metrics: skipped dae: no model"]
    assert rec["cpu_seconds"] >= 0 and rec["max_rss_kb"] > 0


def test_main_profiles_a_metric_and_writes_its_section(shared, tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", os.environ.get("CUDA_VISIBLE_DEVICES", ""))  # main() hides GPUs; restored after
    out = str(tmp_path)
    assert pf.main(["--metrics", "parent", "--webnlg", "3", "--no-cli", "--out", out]) == 0
    rec = pf.load_results(os.path.join(out, pf.RESULTS_FILE))["records"]["parent|cpu"]
    assert set(rec["runs"]) == {"examples/examples.jsonl", "WebNLG 2017 sample (3)"}
    assert rec["runs"]["WebNLG 2017 sample (3)"]["n"] == 3 and rec["hardware"]["cpu_count"] == os.cpu_count()
    md = open(os.path.join(out, "RESULTS.md")).read()
    assert "<!-- BEGIN profile -->" in md and "`parent` on cpu" in md


def test_bad_arguments_are_refused():
    for argv in (["--no-examples"], ["--webnlg", "-1"], ["--device", "tpu"], ["--model", "x"]):
        with pytest.raises(SystemExit):
            pf.parse_args(argv)
