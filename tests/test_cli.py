"""The d2t-metrics command line, end to end, on fake metric modules and on PARENT."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from d2t_metrics.cli import corpus_scores, main, read_corpus, UsageError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples", "examples.jsonl")

# A metric with references (a list per example), optional tables, and the
# usual keyword arguments; it reports what it was given so the test can check
# the plumbing.
FAKE_REFS = '''
import datasets
import evaluate


class FakeRefs(evaluate.Metric):
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

FAKES = {
    "fake_refs": FAKE_REFS,
    "fake_tables": FAKE_TABLES,
    "fake_single_ref": FAKE_SINGLE_REF,
    "fake_nomodel": FAKE_NOMODEL,
    "fake_nolib": FAKE_NOLIB,
    "fake_broken": FAKE_BROKEN,
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
        capsys, "score", "--metrics", "fake_refs,fake_tables,fake_single_ref,fake_nomodel,fake_nolib,fake_broken,nope",
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
    assert "skipped fake_broken: it failed with RuntimeError: boom" in err
    assert "skipped nope: no metric module" in err
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


def test_model_config_batch_size_and_default_checkpoint(metrics_dir, tmp_path, capsys):
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
            "--model", "fake_refs=my-org/my-model", "--config", "fake_refs=strict", "--batch-size", "3",
        )
        assert code == 0
        example = read_jsonl(out_path)[0]["fake_refs"]
        assert (example["model"], example["config"], example["batch_size"]) == ("my-org/my-model", "strict", 3)
    finally:
        os.remove(os.path.join(checkpoint, "model.safetensors"))
        os.rmdir(checkpoint)


def test_model_for_a_metric_without_one_is_reported(metrics_dir, tmp_path, capsys):
    inp = write_jsonl(tmp_path / "in.jsonl", ROWS)
    code, out, err = run(capsys, "score", "--metrics", "fake_tables", "--metrics-dir", metrics_dir, "--input", inp, "--model", "fake_tables=/x")
    assert code == 0 and "mean_facts" in out
    assert "warning: fake_tables takes no model; ignoring model '/x'" in err


def test_metrics_needing_missing_inputs_are_skipped(metrics_dir, tmp_path, capsys):
    rows = [{"prediction": "x", "table": "A | p | B"}, {"prediction": "y", "references": ["z"], "table": "A | p | C"}]
    inp = write_jsonl(tmp_path / "in.jsonl", rows)
    code, out, err = run(capsys, "score", "--metrics", "fake_refs,fake_tables", "--metrics-dir", metrics_dir, "--input", inp)
    assert code == 0
    assert "skipped fake_refs: it needs references, which lines 1 lack" in err
    assert "fake_tables" in out
    no_tables = write_jsonl(tmp_path / "no_tables.jsonl", [{"prediction": "x"}])
    code, out, err = run(capsys, "score", "--metrics", "fake_tables", "--metrics-dir", metrics_dir, "--input", no_tables)
    assert code == 1  # nothing ran
    assert "skipped fake_tables: it needs tables, but lines 1 have no 'table'" in err
    assert "no metric ran" in err and out == ""


def test_bad_table_is_reported_with_its_index(metrics_dir, tmp_path, capsys):
    rows = [{"prediction": "x", "table": "A | p | B"}, {"prediction": "y", "table": "A | p"}]
    inp = write_jsonl(tmp_path / "in.jsonl", rows)
    code, _, err = run(capsys, "score", "--metrics", "fake_tables", "--metrics-dir", metrics_dir, "--input", inp)
    assert code == 1
    assert "skipped fake_tables: it rejected the input: example 1: malformed triple 'A | p'" in err


@pytest.mark.parametrize(
    "lines,fragment",
    [
        (["{not json"], "line 1: not valid JSON"),
        (['{"prediction": "ok"}', "[1, 2]"], "line 2: expected a JSON object"),
        (['{"prediction": "ok"}', '{"references": ["r"]}'], "line 2 (example 1): 'prediction' must be a string, got None"),
        (['{"prediction": 3}'], "'prediction' must be a string, got 3"),
        (['{"prediction": "ok", "references": []}'], "'references' must be a non-empty list of strings"),
        (['{"prediction": "ok", "source": 5}'], "'source' must be a string"),
        ([""], "no examples"),
    ],
)
def test_bad_input_file(metrics_dir, tmp_path, capsys, lines, fragment):
    inp = write_jsonl(tmp_path / "in.jsonl", lines)
    code, _, err = run(capsys, "score", "--metrics", "fake_refs", "--metrics-dir", metrics_dir, "--input", inp)
    assert code == 2
    assert fragment in err


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
    assert corpus.references is None and corpus.missing["references"] == [3]
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
