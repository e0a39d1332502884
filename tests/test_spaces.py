"""The Hub Spaces: the table input (d2t_metrics.spaces), every app's gr.Blocks,
the playground's scoring (one example and a JSONL file), the Space metadata,
and the publish command's dry run. Offline; the models are the project's
checkpoints."""

import importlib.util
import json
import math
import os
import re
import shutil
import sys

import pytest

from d2t_metrics import parse_table, publish, spaces
from d2t_metrics.spaces import (
    ATTRIBUTE_VALUE_LAYOUT,
    E2E_LAYOUT,
    FROM_GRID,
    FROM_TEXT,
    TRIPLES_LAYOUT,
    convert_rows,
    example_values,
    grid_from_table,
    grid_rows,
    preview,
    read_table,
    resolve_model,
    table_from_grid,
    table_from_text,
    text_from_table,
)

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
METRICS = sorted(n for n in os.listdir(os.path.join(ROOT, "metrics")) if os.path.isfile(os.path.join(ROOT, "metrics", n, f"{n}.py")))
CHECKPOINTS = sorted(os.listdir(os.path.join(ROOT, "checkpoints")))
PLAYGROUND = os.path.join(ROOT, "spaces", "playground", "app.py")
APPS = {name: os.path.join(ROOT, "metrics", name, "app.py") for name in METRICS}
APPS["playground"] = PLAYGROUND
# The playground's own metrics, which must run here; a metric folder added later may be skipped with a note.
PROJECT_METRICS = ("parent", "nli_semantic_accuracy", "dae", "data_questeval", "fact_accuracy")


def load_module(path, name):
    """Import a file as a module, as a Space runs it (not as part of a package)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def playground():
    return load_module(PLAYGROUND, "d2t_test_playground_app")


# ---------------------------------------------------------------------------
# The table input: grid rows and pasted text -> what parse_table reads

# Every form the README's "Table formats" lists, and a wrapper.
FORMS = [
    "Alan_Bean | birthPlace | Wheeler,_Texas",
    "A | p | B<br>A | q | C",
    "A | p | B<br/>A | q | C",
    "A | p | B\nA | q | C",
    ["A | p | B", "A | q | C"],
    [["Alan_Bean", "birthPlace", "Wheeler,_Texas"]],
    [{"subject": "A", "predicate": "p", "object": "B"}, {"subject": "A", "predicate": "q", "object": "C"}],
    "name[The Eagle], eatType[coffee shop], customer rating[5 out of 5]",
    [["Born", "December 22, 1965"], ["Occupation", "actor"]],
    {"name": "Jane Doe", "occupation": ["actor", "singer"], "age": 41},
    {"table": "name[X], food[Thai]"},
    [["The_Silent_Harbour", "author", '"Ines Varga"'], ["A|B", "p", "C"]],  # a member holding '|'
]


@pytest.mark.parametrize("table", FORMS, ids=range(len(FORMS)))
def test_every_table_form_round_trips_through_grid_and_text(table):
    expected = parse_table(table)
    layout, rows = grid_from_table(table)
    assert parse_table(table_from_grid(rows, layout)) == expected
    assert parse_table(read_table(FROM_GRID, layout, rows, "")) == expected
    text = text_from_table(table)
    assert parse_table(table_from_text(text)) == expected
    assert parse_table(read_table(FROM_TEXT, layout, None, text)) == expected
    source, shown_layout, shown_text = example_values(table)
    assert (source, shown_layout) == (FROM_TEXT, layout) and parse_table(table_from_text(shown_text)) == expected


def test_grid_layouts_give_the_table_kinds():
    triples = table_from_grid([["Alan_Bean", "birthPlace", "Wheeler,_Texas"]], TRIPLES_LAYOUT)
    assert triples == [["Alan_Bean", "birthPlace", "Wheeler,_Texas"]] and parse_table(triples).kind == "triples"
    pairs = table_from_grid([["Born", "1965"], ["Occupation", "actor"]], ATTRIBUTE_VALUE_LAYOUT)
    assert pairs == [["Born", "1965"], ["Occupation", "actor"]] and parse_table(pairs).kind == "attribute_value"
    mr = table_from_grid([["name", "The Eagle"], ["eatType", "coffee shop"]], E2E_LAYOUT)
    assert mr == "name[The Eagle], eatType[coffee shop]" and parse_table(mr).kind == "e2e"
    # Raw strings are kept (PARENT depends on them): underscores, quotes, inner spaces.
    assert table_from_grid([['  The_Silent_Harbour ', "numberOfPages", '"412"']], TRIPLES_LAYOUT) == [["The_Silent_Harbour", "numberOfPages", '"412"']]


def test_grid_rows_accept_what_gradio_gives():
    import pandas as pd

    rows = [["A", "p", "B"], ["", "", ""], [None, float("nan"), None], [" A ", "q", 3]]
    expected = [["A", "p", "B"], ["A", "q", "3"]]
    assert grid_rows(rows) == expected
    assert grid_rows(pd.DataFrame(rows, columns=["subject", "predicate", "object"])) == expected
    assert grid_rows({"data": rows, "headers": ["subject", "predicate", "object"]}) == expected
    assert grid_rows(None) == [] and grid_rows([]) == []


@pytest.mark.parametrize(
    "layout, rows, message",
    [
        (TRIPLES_LAYOUT, [["A", "p", "B"], ["", "", ""], ["A", "q", ""]], "grid row 3: the object is empty"),
        (TRIPLES_LAYOUT, [["", "p", "B"]], "grid row 1: the subject is empty"),
        (TRIPLES_LAYOUT, [["", "", ""], [None, None, None]], "the table is empty"),
        (TRIPLES_LAYOUT, None, "the table is empty"),
        (ATTRIBUTE_VALUE_LAYOUT, [["", "1965"]], "grid row 1: the attribute is empty"),
        (ATTRIBUTE_VALUE_LAYOUT, [["Born", "1965", "extra"]], "grid row 1 has 3 cells"),
        (E2E_LAYOUT, [["name", ""]], "grid row 1: an E2E slot needs a name and a value"),
        (E2E_LAYOUT, [["name", "The [Eagle]"]], "grid row 1: an E2E value cannot contain '\\['"),
        (E2E_LAYOUT, [["eat,Type", "pub"]], "grid row 1: an E2E slot cannot contain ','"),
        ("columns", [["A", "p", "B"]], "unknown grid layout"),
    ],
)
def test_bad_grids_name_the_row(layout, rows, message):
    with pytest.raises(ValueError, match=message):
        read_table(FROM_GRID, layout, rows, "")


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "the table is empty"),
        ("   \n ", "the table is empty"),
        ("A | p", "malformed triple 'A \\| p'"),
        ("name[The Eagle], eatType[pub", "malformed E2E meaning representation"),
        ('[["A", "p", "B"]', "starts like JSON but is not valid JSON"),
        ("{name: 1}", "starts like JSON but is not valid JSON"),
        ('[["A", "p"], ["A", "q", "B"]]', "mixes triples and attribute-value pairs"),
        ("[]", "empty table"),
    ],
)
def test_bad_pasted_tables_raise_parse_tables_message(text, message):
    with pytest.raises(ValueError, match=message):
        read_table(FROM_TEXT, TRIPLES_LAYOUT, None, text)


def test_pasted_text_forms():
    assert table_from_text("A | p | B<br>A | q | C") == "A | p | B<br>A | q | C"  # kept as given
    assert table_from_text("  name[X], food[Thai]\n") == "name[X], food[Thai]"
    assert table_from_text('{"name": "Jane", "occupation": ["actor", "singer"]}') == {"name": "Jane", "occupation": ["actor", "singer"]}
    assert table_from_text('[["Born", "1965"]]') == [["Born", "1965"]]
    # A WebNLG string that merely starts with '[' is still a triple string.
    assert parse_table(table_from_text("[Foo] | p | B")).to_strings() == ["[Foo] | p | B"]
    with pytest.raises(ValueError, match="unknown table source"):
        read_table("clipboard", TRIPLES_LAYOUT, None, "A | p | B")


def test_switching_layouts_converts_rows():
    triples = [["Jane", "occupation", "actor"], ["Jane", "born", "1965"], ["", "", ""]]
    pairs = convert_rows(triples, TRIPLES_LAYOUT, ATTRIBUTE_VALUE_LAYOUT)
    assert pairs == [["name", "Jane"], ["occupation", "actor"], ["born", "1965"]]
    assert convert_rows(pairs, ATTRIBUTE_VALUE_LAYOUT, TRIPLES_LAYOUT) == [["Jane", "occupation", "actor"], ["Jane", "born", "1965"]]
    assert convert_rows(pairs, ATTRIBUTE_VALUE_LAYOUT, E2E_LAYOUT) == pairs
    assert convert_rows([], TRIPLES_LAYOUT, E2E_LAYOUT) == []


def test_preview_says_which_input_is_read_and_shows_errors():
    ok = preview(FROM_TEXT, TRIPLES_LAYOUT, None, "name[The Eagle], eatType[pub]")
    assert ok.startswith("✔️") and "text box" in ok and "E2E meaning representation with 2 slots" in ok
    bad = preview(FROM_GRID, TRIPLES_LAYOUT, [["A", "p", ""]], "name[The Eagle]")
    assert bad.startswith("⚠️") and "the grid" in bad and "grid row 1: the object is empty" in bad


def test_table_input_widget_builds():
    gr = pytest.importorskip("gradio")
    with gr.Blocks():
        widget = spaces.table_input("name[The Eagle], eatType[pub]")
    assert widget.inputs == [widget.source, widget.layout, widget.grid, widget.text]
    assert widget.source.value == FROM_TEXT and widget.layout.value == E2E_LAYOUT
    assert widget.grid.headers == ["slot", "value"] and widget.grid.value["headers"] == ["slot", "value"]
    assert widget.grid.value["data"][:2] == [["name", "The Eagle"], ["eatType", "pub"]]


# ---------------------------------------------------------------------------
# Model resolution


def test_resolve_model_order(tmp_path, monkeypatch):
    import d2t_metrics

    for var in ("D2T_MODEL_DAE", "DAE_MODEL", "D2T_MODEL_NLI_SEMANTIC_ACCURACY"):
        monkeypatch.delenv(var, raising=False)
    checkout_app = os.path.join(ROOT, "metrics", "dae", "app.py")
    assert resolve_model("dae", checkout_app) == (os.path.join(ROOT, "checkpoints", "dae"), "the project's checkpoint")
    monkeypatch.setenv("DAE_MODEL", "/models/dae")
    assert resolve_model("dae", checkout_app, env=("DAE_MODEL",)) == ("/models/dae", "$DAE_MODEL")
    monkeypatch.delenv("DAE_MODEL")

    # A folder copied alone (a Space) whose installed d2t_metrics carries no checkpoints: the
    # paper's Hub model, else the published checkpoint.
    monkeypatch.setattr(d2t_metrics, "checkpoint_path", lambda name: None)
    alone = tmp_path / "space" / "app.py"
    alone.parent.mkdir()
    alone.write_text("")
    assert resolve_model("nli_semantic_accuracy", str(alone), hub_default="roberta-large-mnli") == (
        "roberta-large-mnli", "the paper's model on the Hub")
    model, reason = resolve_model("dae", str(alone))
    assert model is None and "no model for dae" in reason
    published = tmp_path / "snapshot"
    published.mkdir()
    (published / "model.safetensors").write_bytes(b"x")
    (alone.parent / "d2t_space.json").write_text(json.dumps({"checkpoints": {"dae": "org/d2t-metrics-dae"}}))
    import huggingface_hub

    calls = []
    monkeypatch.setattr(huggingface_hub, "snapshot_download", lambda repo_id, repo_type: calls.append((repo_id, repo_type)) or str(published))
    assert resolve_model("dae", str(alone)) == (str(published), "the project's published checkpoint")
    assert calls == [("org/d2t-metrics-dae", "model")]

    # The checkout's checkpoints/<name>, found from the app's own path, when no locator finds one.
    assert resolve_model("dae", checkout_app) == (os.path.join(ROOT, "checkpoints", "dae"), "the project's checkpoint")
    # d2t_metrics.checkpoint_path wins: it finds the checkpoints an installed wheel carries.
    installed = tmp_path / "site-packages" / "dae"
    installed.mkdir(parents=True)
    (installed / "model.safetensors").write_bytes(b"x")
    monkeypatch.setattr(d2t_metrics, "checkpoint_path", lambda name: str(installed) if name == "dae" else None)
    assert resolve_model("dae", str(alone)) == (str(installed), "the project's checkpoint")
    assert resolve_model("dae", checkout_app) == (str(installed), "the project's checkpoint")


# ---------------------------------------------------------------------------
# The apps


@pytest.mark.parametrize("name", sorted(APPS))
def test_app_builds_offline_without_launching(name):
    gr = pytest.importorskip("gradio")
    source = open(APPS[name], encoding="utf-8").read()
    assert "sys.path" not in source, f"{name}/app.py must import d2t_metrics as an installed package"
    module = load_module(APPS[name], f"d2t_test_app_{name}")
    demo = module.build_demo()
    assert isinstance(demo, gr.Blocks)
    assert not getattr(demo, "is_running", False)


@pytest.mark.parametrize("name", METRICS + ["playground"])
def test_folder_is_a_space(name):
    """README front matter, requirements and the app's own-folder load: a folder copied alone deploys."""
    gradio = pytest.importorskip("gradio")
    folder = os.path.dirname(APPS[name])
    text = open(os.path.join(folder, "README.md"), encoding="utf-8").read()
    match = re.match(r"---\n(.*?)\n---\n", text, re.S)
    assert match, "README.md must start with a YAML front matter block"
    front = match.group(1)
    for key in ("title", "emoji", "colorFrom", "colorTo", "description"):
        assert re.search(rf"^{key}: *\S", front, re.M), key
    assert re.search(r"^sdk: gradio$", front, re.M) and re.search(r"^app_file: app.py$", front, re.M)
    assert re.search(r"^pinned: false$", front, re.M)
    assert re.search(rf"^sdk_version: {re.escape(gradio.__version__)}$", front, re.M)
    assert re.search(r"^tags:\n- evaluate\n- metric$", front, re.M)
    app = open(os.path.join(folder, "app.py"), encoding="utf-8").read()
    if name != "playground":  # the playground loads the metric folders it finds
        assert "os.path.dirname(os.path.abspath(__file__))" in app and "evaluate.load(" in app
    reqs = [line.strip() for line in open(os.path.join(folder, "requirements.txt"), encoding="utf-8") if line.strip() and not line.startswith("#")]
    assert any(
        re.fullmatch(r"d2t-metrics\[[a-z,]*spaces[a-z,]*\] @ git\+https://github\.com/\$\{D2T_METRICS_OWNER\}/d2t-metrics@\$\{D2T_METRICS_COMMIT\}", r)
        for r in reqs
    ), reqs


def test_parent_app_runs_from_a_copied_folder(tmp_path):
    """The folder alone, as a Space holds it: the app loads the metric from its own folder."""
    pytest.importorskip("gradio")
    copy = tmp_path / "parent"
    shutil.copytree(os.path.join(ROOT, "metrics", "parent"), copy, ignore=shutil.ignore_patterns("__pycache__"))
    app = load_module(str(copy / "app.py"), "d2t_test_copied_parent_app")
    summary, highlighted, pred_rows, _ = app.score("name[The Eagle], eatType[pub]", "The Eagle is a pub.", "The Eagle is a pub.", "nltk", True, 0.5)
    assert "PARENT F = 1.0000" in summary and pred_rows
    assert app.HERE == str(copy)
    error, *_ = app.score_ui(FROM_TEXT, TRIPLES_LAYOUT, None, "A | p", "r", "p", "nltk", True, 0.5)
    assert "malformed triple" in error and "d2t-error" in error


def test_dae_app_copied_alone_has_no_model_and_offers_rule(tmp_path, monkeypatch):
    """Copied alone, with a d2t_metrics that locates no checkpoint and no d2t_space.json: rule only."""
    import d2t_metrics

    gr = pytest.importorskip("gradio")
    monkeypatch.setattr(d2t_metrics, "checkpoint_path", lambda name: None)
    monkeypatch.delenv("DAE_MODEL", raising=False)
    monkeypatch.delenv("D2T_MODEL_DAE", raising=False)
    copy = tmp_path / "dae"
    shutil.copytree(os.path.join(ROOT, "metrics", "dae"), copy, ignore=shutil.ignore_patterns("__pycache__"))
    app = load_module(str(copy / "app.py"), "d2t_test_copied_dae_app")
    model, reason = app.default_model()
    assert model is None and "no model for dae" in reason
    assert isinstance(app.build_demo(), gr.Blocks)


# ---------------------------------------------------------------------------
# The playground


def test_playground_discovers_metric_folders(playground, tmp_path, monkeypatch):
    assert playground.discover_metrics()[:3] == ["parent", "nli_semantic_accuracy", "dae"]
    assert set(playground.discover_metrics()) == set(METRICS)
    fake = tmp_path / "metrics"
    (fake / "fact_accuracy").mkdir(parents=True)
    (fake / "fact_accuracy" / "fact_accuracy.py").write_text("")
    (fake / "parent").mkdir()
    (fake / "parent" / "parent.py").write_text("")
    (fake / "notes").mkdir()
    monkeypatch.setenv("D2T_METRICS_DIR", str(fake))
    assert playground.discover_metrics() == ["parent", "fact_accuracy"]


def test_playground_scores_one_example_with_every_metric(playground):
    import evaluate

    # A second fact the text plainly omits: an unsaid occupation ("Test_pilot", 0.03-0.05 entailment) sits at
    # the calibrated threshold (0.033 / 0.043 for the last two checkpoints), NASA's selection far below it.
    table = ["Alan_Bean | birthPlace | Wheeler,_Texas", "Alan_Bean | selectedByNasa | 1963"]
    prediction = "Alan Bean was born in Wheeler, Texas, and walked on the Moon."
    reference = "Alan Bean was born in Wheeler, Texas, and was selected by NASA in 1963."
    results = playground.score_example(table, prediction, reference)
    assert list(results) == playground.discover_metrics()
    for name, result in results.items():
        if name not in PROJECT_METRICS and result["status"] != "ok":  # a metric folder added later, not runnable here
            assert result["status"] in ("skipped", "error") and result["note"], (name, result)
            continue
        assert result["status"] == "ok", (name, result)
        assert result["explanation"] and isinstance(result["main"][1], float)

    parent = results["parent"]
    direct = evaluate.load(os.path.join(ROOT, "metrics", "parent")).compute(
        predictions=[prediction], references=[[reference]], tables=[table], show_progress=False)
    assert parent["main"] == ("F1", pytest.approx(direct["f1"], abs=1e-12))
    assert parent["scores"]["f1"] == pytest.approx(direct["f1"], abs=1e-12)
    assert "entailed by table" in parent["explanation"] and "wheeler" in parent["explanation"]

    nli = results["nli_semantic_accuracy"]
    assert "checkpoints/nli_semantic_accuracy" in nli["model"]
    assert nli["example"]["label"] in ("omission", "hallucination", "omission+hallucination")
    assert "1963" in nli["explanation"] and [o["fact"] for o in nli["example"]["omitted_facts"]] == ["Alan_Bean | selectedByNasa | 1963"]

    dae = results["dae"]
    assert "checkpoints/dae" in dae["model"]
    assert dae["example"]["num_arcs"] > 0 and "P(entailed)" in dae["explanation"]
    assert dae["main"][1] == pytest.approx(dae["example"]["score"])

    html = playground.panel_html("parent", parent)
    assert f"{direct['f1']:.4f}" in html and 'class="d2t-main-score"' in html
    # each section says what its number depends on, as the command line prints it
    assert parent["signature"] == evaluate.load(os.path.join(ROOT, "metrics", "parent")).signature()
    assert f'<small class="d2t-signature" style="color:#555">signature <code>{parent["signature"]}</code>' in html
    assert nli["signature"].startswith("metric:nli_semantic_accuracy|") and "|dtype:" not in nli["signature"]

    # The summary: one row per metric, its headline score and verdict, linking to its section.
    summary = playground.summary_html(list(results), results)
    assert summary.count('class="d2t-summary-row"') == len(results)
    for name, result in results.items():
        assert f'href="#d2t-metric-{name}"' in summary, name
        assert (f'{result["main"][1]:.4f}' if result["status"] == "ok" else result["status"] + ": ") in summary, name
    assert "omission" in summary and ("arcs not entailed" in summary or "all arcs entailed" in summary)
    # Every table of every section scrolls inside its own box rather than running past a narrow screen.
    for name, result in ((n, r) for n, r in results.items() if n in PROJECT_METRICS):
        section = playground.panel_html(name, result)
        assert section.count("<table") == len(re.findall(r'<div class="d2t-scroll"[^>]*><table', section)) > 0, name


def test_playground_notes_and_errors(playground):
    results = playground.score_example("name[The Eagle], eatType[pub]", "The Eagle is a pub.", "", ["parent", "dae"])
    assert results["parent"]["status"] == "skipped" and "needs a reference" in results["parent"]["note"]
    assert "Skipped: needs a reference" in playground.panel_html("parent", results["parent"])
    assert results["dae"]["status"] == "ok"
    with pytest.raises(ValueError, match="malformed triple"):
        playground.score_example("A | p", "text")
    # The summary shows the error; the metrics' sections stay empty.
    summary, *panels = playground.score_ui(FROM_TEXT, TRIPLES_LAYOUT, None, "A | p", "text", "")
    assert len(panels) == len(playground.discover_metrics()) and panels == [""] * len(panels)
    assert "malformed triple" in summary and "d2t-error" in summary
    summary, *_ = playground.score_ui(FROM_GRID, TRIPLES_LAYOUT, [["A", "p", ""]], "", "text", "")
    assert "grid row 1: the object is empty" in summary


HOSTILE = "<img src=x onerror=alert(1)> | p"


def test_toast_messages_are_plain_text(playground, monkeypatch):
    """gradio renders a toast as HTML: every message that may quote the user's input is escaped first."""
    import gradio as gr

    assert spaces.toast_text(HOSTILE) == "&lt;img src=x onerror=alert(1)&gt; | p"
    assert spaces.toast_text("a 'b' & c") == "a 'b' &amp; c"
    shown = []
    monkeypatch.setattr(gr, "Warning", lambda message, *a, **k: shown.append(message))
    box = spaces.shown_error(ValueError(f"malformed triple {HOSTILE!r}"))
    playground.score_ui(FROM_TEXT, TRIPLES_LAYOUT, None, HOSTILE, "text", "")
    playground.score_file_ui(None)
    assert len(shown) == 3 and "malformed triple" in shown[0] + shown[1]
    assert all("<" not in m and ">" not in m for m in shown), shown
    assert "&lt;img src=x" in shown[1] and "<img" not in box


def test_playground_unavailable_model_is_a_note(playground, monkeypatch, tmp_path):
    """A metric whose model cannot load is skipped with the reason; DAE falls back to its rule config."""
    monkeypatch.setitem(playground._LOADED, "nli_semantic_accuracy", playground.Loaded("nli_semantic_accuracy", note="its model is not available: offline"))
    monkeypatch.setenv("D2T_MODEL_DAE", str(tmp_path / "missing"))
    monkeypatch.delitem(playground._LOADED, "dae", raising=False)
    dae = playground._load("dae")
    assert dae.available and dae.config == "rule" and "model-free 'rule' config" in dae.note
    monkeypatch.setitem(playground._LOADED, "dae", dae)
    results = playground.score_example("name[The Eagle], eatType[pub]", "The Eagle is a pub.", "The Eagle is a pub.")
    assert results["nli_semantic_accuracy"]["status"] == "skipped"
    assert "Skipped: its model is not available: offline" in playground.panel_html("nli_semantic_accuracy", results["nli_semantic_accuracy"])
    assert results["dae"]["status"] == "ok" and "rule" in results["dae"]["model"]
    assert "model-free" in playground.panel_html("dae", results["dae"])


def test_playground_batch_scores_a_jsonl_file(playground, tmp_path):
    # Six examples of examples/examples.jsonl: WebNLG, E2E and WikiBio lines, every table form.
    lines = [line for line in open(os.path.join(ROOT, "examples", "examples.jsonl"), encoding="utf-8") if line.strip()]
    examples = tmp_path / "examples.jsonl"
    examples.write_text("".join(lines[:3] + lines[10:12] + lines[-1:]), encoding="utf-8")
    out = playground.score_file(str(examples), str(tmp_path))
    ids = [json.loads(line)["id"] for line in open(examples, encoding="utf-8") if line.strip()]
    rows = [json.loads(line) for line in open(out["results"], encoding="utf-8")]
    assert [r["id"] for r in rows] == ids
    for row in rows:
        assert set(playground.discover_metrics()) <= set(row)
        for m in playground.discover_metrics():
            # fact_accuracy's accuracy is None, as documented, for a text with no checkable fact
            assert isinstance(row[m]["score"], float) or (m == "fact_accuracy" and row[m]["score"] is None), (m, row[m])
        assert isinstance(row["data_questeval"]["score"], float)
    summary = {(m, k): v for m, k, v in out["summary"]}
    assert {("parent", "f1"), ("nli_semantic_accuracy", "ok_rate"), ("dae", "score")} <= set(summary)
    counts = {"verifiable", "supported", "contradicted", "unverifiable", "generated", "ground_truth_facts", "found", "scored_examples",
              "questions", "ungrounded", "truncated_examples"}
    assert all(not math.isnan(v) and (v >= 0 if k in counts else 0.0 <= v <= 1.0) for (m, k), v in summary.items())
    with open(out["plot"], "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"
    status, table, plot, files = playground.score_file_ui(str(examples))
    assert "Scored 6 examples" in status and plot.endswith(".png") and len(files) == 2
    assert table == out["summary"]


def test_playground_keeps_the_newest_results_in_one_folder_it_removes_at_exit(playground, monkeypatch, tmp_path):
    """A Space runs for weeks: scored files' results may not pile up in /tmp (one folder each, never
    removed, was the old way)."""
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.setattr(playground, "_RESULTS_ROOT", [])
    registered = []
    monkeypatch.setattr(playground.atexit, "register", lambda *args: registered.append(args))
    monkeypatch.setattr(playground, "KEEP_RESULTS", 3)
    made = []
    for i in range(7):
        made.append(playground.new_results_dir())
        os.utime(made[-1], (1000 + i, 1000 + i))  # the order they were made in, whatever the clock's grain
    root = os.path.dirname(made[0])
    assert os.listdir(tmp_path) == [os.path.basename(root)] and all(os.path.dirname(d) == root for d in made)
    assert sorted(os.listdir(root)) == sorted(os.path.basename(d) for d in made[-3:])
    assert len(registered) == 1 and registered[0][1] == root  # shutil.rmtree(root, True) when the process exits
    registered[0][0](*registered[0][1:])
    assert not os.path.exists(root)
    assert os.path.dirname(playground.new_results_dir()) != root  # a fresh root once the old one is gone


def test_playground_batch_reports_bad_files(playground, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prediction": "x", "table": "A | p | B"}\n{"prediction": "y", "table": "A | p"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"bad.jsonl, line 2: table: .*malformed triple"):
        playground.score_file(str(bad), str(tmp_path))
    status, *rest = playground.score_file_ui(str(bad))
    assert "line 2" in status and "d2t-error" in status and rest == [None, None, None]
    # Without references PARENT is skipped with a note; the others still run.
    no_refs = tmp_path / "no_refs.jsonl"
    no_refs.write_text('{"prediction": "The Eagle is a pub.", "table": "name[The Eagle], eatType[pub]"}\n', encoding="utf-8")
    out = playground.score_file(str(no_refs), str(tmp_path))
    assert any(n.startswith("parent skipped: it needs references") for n in out["notes"])
    assert "parent" not in json.loads(open(out["results"], encoding="utf-8").readline())


# ---------------------------------------------------------------------------
# Publishing (dry run only: there is no network)


def checkpoint_files(name):
    """Every file of ``checkpoints/<name>/``, subfolders included (fact_accuracy
    keeps one checkpoint per extractor), by its path inside the folder."""
    root = os.path.join(ROOT, "checkpoints", name)
    found = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if not d.startswith(".")]
        for f in filenames:
            if not f.startswith("."):
                path = os.path.join(dirpath, f)
                found[os.path.relpath(path, root).replace(os.sep, "/")] = os.path.getsize(path)
    return found


def test_publish_dry_run_lists_every_repository_and_fills_the_commit(tmp_path, capsys):
    commit = "0123456789abcdef0123456789abcdef01234567"
    staging = tmp_path / "staged"
    sources = {p: open(p, encoding="utf-8").read() for p in
               [os.path.join(ROOT, "metrics", n, "requirements.txt") for n in METRICS] + [os.path.join(ROOT, "spaces", "playground", "requirements.txt")]}
    assert publish.main(["--owner", "test-org", "--github-owner", "gh-user", "--commit", commit, "--dry-run", "--json",
                         "--staging-dir", str(staging)]) == 0
    plan = json.loads(capsys.readouterr().out)
    assert plan["dry_run"] and plan["commit"] == commit
    uploads = {u["repo_id"]: u for u in plan["uploads"]}
    expected = {f"test-org/{n}": "space" for n in METRICS}
    expected["test-org/d2t-metrics-playground"] = "space"
    expected.update({f"test-org/d2t-metrics-{n}": "model" for n in CHECKPOINTS})
    assert {r: u["repo_type"] for r, u in uploads.items()} == expected
    git_line = f"git+https://github.com/gh-user/d2t-metrics@{commit}"

    for name in METRICS:
        space = uploads[f"test-org/{name}"]
        files = {f["path"]: f["size"] for f in space["files"]}
        source_files = {p for p in os.listdir(os.path.join(ROOT, "metrics", name))
                        if os.path.isfile(os.path.join(ROOT, "metrics", name, p)) and not p.endswith(".pyc")}
        assert source_files | {"d2t_space.json"} == set(files)
        assert files["app.py"] == os.path.getsize(os.path.join(ROOT, "metrics", name, "app.py"))
        assert space["space_sdk"] == "gradio" and space["requirement"].endswith(git_line)
        staged = open(staging / "spaces" / name / "requirements.txt", encoding="utf-8").read()
        assert git_line in staged and "${D2T_METRICS" not in staged
        config = json.load(open(staging / "spaces" / name / "d2t_space.json", encoding="utf-8"))
        assert config["commit"] == commit
        assert config["checkpoints"] == ({name: f"test-org/d2t-metrics-{name}"} if name in CHECKPOINTS else {})

    playground = uploads["test-org/d2t-metrics-playground"]
    files = {f["path"] for f in playground["files"]}
    assert {"app.py", "README.md", "requirements.txt", "d2t_space.json", "examples.jsonl"} <= files
    assert all(f"metrics/{n}/{n}.py" in files and f"metrics/{n}/app.py" in files for n in METRICS)
    assert git_line in open(staging / "spaces" / "d2t-metrics-playground" / "requirements.txt", encoding="utf-8").read()
    config = json.load(open(staging / "spaces" / "d2t-metrics-playground" / "d2t_space.json", encoding="utf-8"))
    assert config["checkpoints"] == {n: f"test-org/d2t-metrics-{n}" for n in CHECKPOINTS}

    for name in CHECKPOINTS:
        model = uploads[f"test-org/d2t-metrics-{name}"]
        assert {f["path"]: f["size"] for f in model["files"]} == checkpoint_files(name)
    # Checkpoints are uploaded before the Spaces that download them.
    order = [u["repo_type"] for u in plan["uploads"]]
    assert order == sorted(order)  # "model" < "space"

    # The source tree keeps its placeholders.
    for path, text in sources.items():
        assert open(path, encoding="utf-8").read() == text and "${D2T_METRICS_COMMIT}" in text


def test_publish_dry_run_text_output(capsys):
    assert publish.main(["--owner", "test-org", "--commit", "abc1234", "--dry-run"]) == 0
    out = capsys.readouterr().out
    for name in METRICS:
        assert re.search(rf"^space \(gradio\) test-org/{name} <- metrics/{name}: \d+ files", out, re.M)
        assert re.search(r"^    app\.py +[\d,]+$", out, re.M)
    assert re.search(r"^space \(gradio\) test-org/d2t-metrics-playground <- spaces/playground", out, re.M)
    for name in CHECKPOINTS:
        n_files = len(checkpoint_files(name))
        assert re.search(rf"^model test-org/d2t-metrics-{name} <- checkpoints/{name}: {n_files} files", out, re.M)
        assert re.search(r"^    (\w+/)?adapter_model\.safetensors +[\d,]+$", out, re.M)
    assert "requirement: d2t-metrics[parent,spaces] @ git+https://github.com/" in out
    assert out.rstrip().endswith(f"dry run: nothing uploaded ({len(METRICS) + 1 + len(CHECKPOINTS)} repositories)")


def test_publish_refuses_bad_arguments(tmp_path, capsys):
    assert publish.main(["--owner", "bad owner", "--commit", "abc", "--dry-run"]) == 2
    assert "is not a Hub user or organization name" in capsys.readouterr().err
    assert publish.main(["--owner", "org", "--commit", "abc", "--dry-run", "--root", str(tmp_path)]) == 2
    assert "no metric folders" in capsys.readouterr().err
    (tmp_path / "x").write_text("")
    assert publish.main(["--owner", "org", "--commit", "abc", "--dry-run", "--staging-dir", str(tmp_path)]) == 2
    assert "is not empty" in capsys.readouterr().err
