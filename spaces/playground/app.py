"""d2t-metrics playground: every metric of the project on one input, a summary then each explanation.

Run ``python spaces/playground/app.py`` from a checkout with d2t-metrics
installed (``pip install -e ".[all]"``); published, it is its own Hub Space
(``python -m d2t_metrics.publish`` stages the metric folders and the examples
next to it). Importing this file launches nothing: ``build_demo()`` builds the
``gr.Blocks``, :func:`score_example` scores one input with every metric, and
:func:`score_file` scores a JSONL file in the command line's format.

Metrics are the folders ``metrics/<name>/<name>.py`` found next to this app
(a published Space) or in the checkout, so new metric folders show up without
a change here. Models load once per process, on first use: the project's
checkpoint where present, else the paper's Hub model, else the project's
published checkpoint; a metric whose model cannot be loaded is skipped with a
note (a metric with a model-free config, DAE's ``rule``, falls back to it).

Results are laid out to be read from a phone (390 px) to a wide screen: a
summary (:func:`summary_html`: each metric's headline score and verdict),
then each metric's section at full width (:func:`panel_html`), one under the
other; long details are collapsed (``<details>``) and wide tables scroll inside
their own box. ``tests/test_browser.py`` checks from the rendered page, at
1,400, 1,024 and 390 px, that no result block overlaps another and none runs
past the right edge, and saves the screenshots ``screenshot-<width>.png``.
"""

import atexit
import html
import importlib.util
import inspect
import json
import os
import tempfile
import threading
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

HERE = os.path.dirname(os.path.abspath(__file__))
CHECKOUT_ROOT = os.path.dirname(os.path.dirname(HERE))

# What the playground knows about the project's metrics; a metric folder not
# listed here still runs, shown with its "score" and its raw example dict.
KNOWN = {
    "parent": {"title": "PARENT", "main": ("f1", "F1"), "options": {"return_ngrams": True}},
    "nli_semantic_accuracy": {
        "title": "NLI semantic accuracy", "main": ("score", "score (checks pooled)"),
        "hub": "roberta-large-mnli", "env": ("NLI_MODEL",),
    },
    "dae": {"title": "DAE", "main": ("score", "arc P(entailed), pooled"), "env": ("DAE_MODEL",)},
    "data_questeval": {"title": "Data-QuestEval"},
    "fact_accuracy": {"title": "Fact accuracy", "main": ("score", "accuracy")},
    "semantic_accuracy": {"title": "Semantic accuracy (combined)", "main": ("score", "combined score")},
}

FALLBACK_EXAMPLES = [
    {
        "id": "webnlg", "prediction": "Alan Bean was born in Wheeler, Texas, and walked on the Moon.",
        "references": ["Alan Bean was born in Wheeler, Texas, and was selected by NASA in 1963."],
        "table": ["Alan_Bean | birthPlace | Wheeler,_Texas", "Alan_Bean | selectedByNasa | 1963"],
        "note": "omission; the Moon walk is not in the table",
    },
    {
        "id": "e2e", "prediction": "The Eagle is a coffee shop.",
        "references": ["The Eagle is a coffee shop near Burger King."],
        "table": "name[The Eagle], eatType[coffee shop], near[Burger King]", "note": "omission",
    },
]


# ---------------------------------------------------------------------------
# Finding metrics, examples and models


def metrics_dir() -> Optional[str]:
    """``$D2T_METRICS_DIR``, else ``metrics/`` next to this app (a published Space), else the
    checkout's, else the one the installed d2t_metrics locates (``d2t_metrics.locations``)."""
    for candidate in (os.environ.get("D2T_METRICS_DIR"), os.path.join(HERE, "metrics"), os.path.join(CHECKOUT_ROOT, "metrics")):
        if candidate and os.path.isdir(candidate):
            return candidate
    try:
        from d2t_metrics.locations import metrics_dir as located
    except ImportError:  # a d2t_metrics without the locator
        return None
    return located()


def discover_metrics() -> List[str]:
    """Names of the metric folders, the project's known ones first."""
    folder = metrics_dir()
    if folder is None:
        return []
    from d2t_metrics.runner import available_metrics

    names = available_metrics(folder)
    order = {name: i for i, name in enumerate(KNOWN)}
    return sorted(names, key=lambda n: (order.get(n, len(order)), n))


def title(name: str) -> str:
    return KNOWN.get(name, {}).get("title", name)


def examples_file() -> Optional[str]:
    for candidate in (os.path.join(HERE, "examples.jsonl"), os.path.join(CHECKOUT_ROOT, "examples", "examples.jsonl")):
        if os.path.isfile(candidate):
            return candidate
    return None


def load_examples() -> List[Dict[str, Any]]:
    """The project's hand-written examples (``examples/examples.jsonl``) with a table."""
    path = examples_file()
    rows = []
    if path:
        with open(path, encoding="utf-8-sig") as f:
            rows = [json.loads(line) for line in f if line.strip()]
    rows = [r for r in rows if "table" in r and "prediction" in r] or FALLBACK_EXAMPLES
    return rows


def _import_app(name: str):
    """The metric folder's ``app.py`` as a module (for its ``explain``), or ``None``."""
    path = os.path.join(metrics_dir() or "", name, "app.py")
    if not os.path.isfile(path):
        return None
    spec = importlib.util.spec_from_file_location(f"d2t_playground_app_{name}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception:  # noqa: BLE001 - a broken demo must not break the playground
        return None
    return module


@dataclass
class Loaded:
    """A metric ready to compute, or the reason it cannot run here (``metric`` is ``None``)."""

    name: str
    metric: Any = None
    config: Optional[str] = None
    model: Optional[str] = None
    origin: str = ""
    note: str = ""
    app: Any = None
    lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def available(self) -> bool:
        return self.metric is not None

    def describe(self) -> str:
        if not self.available:
            return f"unavailable: {self.note}"
        model = self.model
        if model and os.path.isabs(model) and model.startswith(CHECKOUT_ROOT + os.sep):
            model = os.path.relpath(model, CHECKOUT_ROOT)
        text = f"model {model} ({self.origin})" if model else "no model"
        if self.config:
            text += f", config {self.config}"
        return text


_LOADED: Dict[str, Loaded] = {}
_LOAD_LOCK = threading.Lock()


def _unavailable_reason(error: BaseException) -> Optional[str]:
    from d2t_metrics.hub import ModelNotAvailableError

    if isinstance(error, ModelNotAvailableError):
        return f"its model is not available: {error}"
    if isinstance(error, ImportError):
        return f"a library it needs is missing: {error}"
    if isinstance(error, OSError):
        return f"its model is not available: {error}"
    return None


def _construct(cls, module_hash, config, model):
    metric = cls(config_name=config, hash=module_hash, **({"model": model} if model is not None else {}))
    metric.download_and_prepare()  # where the metrics load their models
    return metric


def load_metric(name: str) -> Loaded:
    """The metric ``name`` with its model, loaded once per process."""
    with _LOAD_LOCK:
        if name not in _LOADED:
            _LOADED[name] = _load(name)
        return _LOADED[name]


def _load(name: str) -> Loaded:
    from d2t_metrics.runner import load_metric_class
    from d2t_metrics.spaces import model_candidates

    info = KNOWN.get(name, {})
    try:
        cls, module_hash = load_metric_class(os.path.join(metrics_dir(), name))
    except Exception as e:  # noqa: BLE001
        return Loaded(name, note=_unavailable_reason(e) or f"it cannot be imported: {type(e).__name__}: {e}")
    app = _import_app(name)
    try:
        takes_model = "model" in inspect.signature(cls.__init__).parameters
    except (TypeError, ValueError):
        takes_model = False
    if not takes_model:
        try:
            return Loaded(name, metric=_construct(cls, module_hash, None, None), app=app)
        except Exception as e:  # noqa: BLE001
            return Loaded(name, note=_unavailable_reason(e) or f"{type(e).__name__}: {e}", app=app)
    tried = []
    candidates = model_candidates(name, __file__, hub_default=info.get("hub"), env=info.get("env", ()))
    if getattr(cls, "COMPONENT_CHECKPOINTS", False):
        # a combination of metrics (semantic_accuracy): the folder of the project's checkpoints, one per component
        folder = cls.checkpoint_path()
        candidates = [(folder, "the project's checkpoints")] if folder else []
    for model, origin in candidates:
        try:
            metric = _construct(cls, module_hash, None, model)
        except Exception as e:  # noqa: BLE001
            reason = _unavailable_reason(e)
            if reason is None:
                return Loaded(name, note=f"{type(e).__name__}: {e}", app=app)
            tried.append(f"{model}: {reason}")
            continue
        return Loaded(name, metric=metric, model=model, origin=origin, app=app)
    why = "; ".join(tried) or f"no model found (no checkpoints/{name}, no published checkpoint)"
    for config in getattr(cls, "MODEL_FREE_CONFIGS", ()):
        try:
            metric = _construct(cls, module_hash, config, None)
        except Exception:  # noqa: BLE001
            continue
        return Loaded(name, metric=metric, config=config, app=app, note=f"the model-free '{config}' config runs instead ({why})")
    return Loaded(name, note=why, app=app)


# ---------------------------------------------------------------------------
# Scoring one example


def _corpus(predictions, references, tables):
    from d2t_metrics.runner import Corpus

    n = len(predictions)
    lines = list(range(1, n + 1))
    return Corpus(
        ids=list(range(n)), predictions=list(predictions), references=references, tables=list(tables), sources=None,
        line_numbers=lines, missing_lines={"references": [] if references else lines, "table": [], "source": lines},
    )


def score_example(table: Any, prediction: str, reference: Optional[str] = None, metrics: Optional[List[str]] = None) -> Dict[str, Dict[str, Any]]:
    """Score one input with every metric (or those named): ``{name: result}``.

    Each result has ``status`` ("ok", "skipped" or "error"), ``note`` (why it
    was skipped, or a fallback), ``model``; when it ran, ``scores`` (the
    corpus-level numbers), ``example`` (its per-example dict), ``main`` (the
    metric's headline number and label), ``signature`` (what the number depends
    on, as ``d2t-metrics score`` prints it; ``None`` if the metric says none) and
    ``explanation`` (HTML). A bad table raises ``ValueError`` before any metric runs.
    """
    from d2t_metrics import parse_table
    from d2t_metrics.runner import Skip, build_compute_kwargs, corpus_scores, metric_signature

    parse_table(table)
    if not str(prediction or "").strip():
        raise ValueError("enter a generated text")
    references = [[reference.strip()]] if reference and reference.strip() else None
    corpus = _corpus([prediction], references, [table])
    results: Dict[str, Dict[str, Any]] = {}
    for name in metrics or discover_metrics():
        loaded = load_metric(name)
        out: Dict[str, Any] = {"title": title(name), "model": loaded.describe(), "note": loaded.note}
        results[name] = out
        if not loaded.available:
            out["status"] = "skipped"
            continue
        try:
            kwargs = build_compute_kwargs(loaded.metric, corpus, None, False)
        except Skip as e:
            out["status"] = "skipped"
            out["note"] = "needs a reference text: enter one" if references is None and "references" in str(e) else str(e)
            continue
        kwargs.update(KNOWN.get(name, {}).get("options", {}))
        try:
            with loaded.lock:
                result = loaded.metric.compute(**kwargs)
        except ValueError as e:
            out.update(status="error", note=str(e))
            continue
        except Exception as e:  # noqa: BLE001 - a model that fails to load at compute time: this section says so, the others still show
            reason = _unavailable_reason(e)
            out.update(status="skipped" if reason else "error", note=reason or f"{type(e).__name__}: {e}")
            continue
        example = result["examples"][0]
        key, label = KNOWN.get(name, {}).get("main", ("score", "score"))
        out.update(status="ok", scores=corpus_scores(result), example=example, main=(label, example.get(key, example.get("score"))),
                   signature=metric_signature(name, loaded.metric, kwargs))
        out["explanation"] = _explain(loaded, example, prediction)
    return results


def _explain(loaded: Loaded, example: Dict[str, Any], prediction: str) -> str:
    explain = getattr(loaded.app, "explain", None)
    if callable(explain):
        try:
            return explain(example, prediction, loaded.metric)
        except Exception:  # noqa: BLE001 - fall back to the raw dict
            pass
    shown = json.dumps(example, indent=1, ensure_ascii=False, default=str)
    if len(shown) > 4000:
        shown = shown[:4000] + "\n…"
    return f"<pre style='white-space:pre-wrap;overflow-wrap:anywhere'>{html.escape(shown)}</pre>"


def _number(value) -> str:
    if value is None:
        return "–"
    return f"{value:.4f}" if isinstance(value, float) else html.escape(str(value))


def headline(name: str, result: Dict[str, Any]) -> tuple:
    """``(label, value, verdict)`` of a metric that ran: the number the summary shows and a short verdict
    (``d2t_metrics.explain.headline``, which the command line's ``explain`` prints too)."""
    from d2t_metrics.explain import headline as metric_headline

    _, _, verdict = metric_headline(name, result["example"])
    label, value = result["main"]
    return label, value, verdict


# Inline styles, not a stylesheet: gradio 6 takes CSS only at launch(), and a
# published Space launches with none.
_ROW = "display:flex;flex-wrap:wrap;gap:2px 16px;padding:6px 8px;border-bottom:1px solid #ddd;align-items:baseline;text-align:left"


def summary_html(names: List[str], results: Dict[str, Dict[str, Any]]) -> str:
    """The summary: one row per metric with its headline score and its verdict (or why it did not run),
    each linking to the metric's section below. A row is a wrapping flex line: name, score and verdict
    side by side on a wide screen; on a phone the verdict goes under them at full width."""
    rows = []
    for name in names:
        result = results[name]
        link = f'<a href="#d2t-metric-{html.escape(name)}" style="flex:0 0 11em;font-weight:600;text-align:left">{html.escape(result["title"])}</a>'
        if result["status"] == "ok":
            label, value, verdict = headline(name, result)
            score = f'<small>{html.escape(label)}</small> <b class="d2t-summary-score">{_number(value)}</b>'
        else:
            score, verdict = "–", ("skipped: " if result["status"] == "skipped" else "error: ") + str(result["note"])
        rows.append(f'<div class="d2t-summary-row" data-metric="{html.escape(name)}" style="{_ROW}">{link}'
                    f'<span style="flex:0 0 13em">{score}</span>'
                    f'<span style="flex:1 1 18em;min-width:0;overflow-wrap:break-word">{html.escape(verdict)}</span></div>')
    return ('<div class="d2t-summary" style="border:1px solid #ddd;border-bottom:none;border-radius:6px;max-width:100%">'
            + "".join(rows) + "</div>")


def panel_html(name: str, result: Dict[str, Any]) -> str:
    """One metric's section: its headline number, its other scores and its explanation."""
    from d2t_metrics.spaces import error_html, note_html

    head = f'<h3 style="margin:0 0 4px 0">{html.escape(result["title"])}</h3>'
    signature = (f'<br><small class="d2t-signature" style="color:#555">signature <code>{html.escape(result["signature"])}</code></small>'
                 if result.get("signature") else "")
    model = f'<p style="margin:0 0 6px 0;overflow-wrap:anywhere"><small>{html.escape(result["model"])}</small>{signature}</p>'
    if result["status"] == "skipped":
        body = note_html(f"Skipped: {result['note']}")
    elif result["status"] == "error":
        body = error_html(result["note"])
    else:
        label, value = result["main"]
        body = (
            f'<p class="d2t-main" data-metric="{html.escape(name)}" style="font-size:1.4em;margin:4px 0">'
            f'{html.escape(label)} <b class="d2t-main-score">{_number(value)}</b></p>'
        )
        if result.get("note"):
            body += note_html(result["note"])
        scores = {k: v for k, v in result["example"].items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
        flags = {k: v for k, v in result["example"].items() if isinstance(v, bool) or k == "label"}
        body += ('<p style="overflow-wrap:break-word"><small>'
                 + " · ".join(f"{html.escape(k)} {_number(v)}" for k, v in {**scores, **flags}.items()) + "</small></p>")
        body += result["explanation"]
    return (f'<section class="d2t-metric" id="d2t-metric-{html.escape(name)}" '
            f'style="max-width:100%;overflow-wrap:break-word">{head}{model}{body}</section>')


# ---------------------------------------------------------------------------
# Scoring a file


# A Space runs for weeks: each scored file's results go to a folder of their own under one folder per
# process (removed when it exits), and only the newest KEEP_RESULTS stay (gradio has copied what it
# served into its own cache by then), so scoring files never fills the disk.
KEEP_RESULTS = 16
_RESULTS_ROOT: List[str] = []
_RESULTS_LOCK = threading.Lock()


def new_results_dir() -> str:
    """A fresh folder for one scored file's results, the oldest beyond :data:`KEEP_RESULTS` removed."""
    import shutil

    with _RESULTS_LOCK:
        if not _RESULTS_ROOT or not os.path.isdir(_RESULTS_ROOT[0]):
            _RESULTS_ROOT[:] = [tempfile.mkdtemp(prefix="d2t-playground-")]
            atexit.register(shutil.rmtree, _RESULTS_ROOT[0], True)
        root = _RESULTS_ROOT[0]
        made = tempfile.mkdtemp(dir=root)
        runs = sorted((os.path.join(root, d) for d in os.listdir(root)), key=os.path.getmtime)
        for old in runs[:-KEEP_RESULTS]:
            if old != made:
                shutil.rmtree(old, ignore_errors=True)
        return made


def score_file(path: str, out_dir: Optional[str] = None, metrics: Optional[List[str]] = None) -> Dict[str, Any]:
    """Score a JSONL file in the command line's format with every available metric.

    Returns ``{"results": path of the per-example JSONL (the command line's
    output format), "plot": path of a PNG of the corpus scores, "summary":
    [[metric, score, value], ...], "notes": [...]}``. A bad file raises
    ``ValueError`` with the command line's message (file, line).
    """
    from d2t_metrics.runner import MetricRun, Skip, UsageError, build_compute_kwargs, corpus_scores, decode_utf8, parse_corpus, with_line_numbers, write_output

    if not path:
        raise ValueError("upload a JSONL file first")
    name = os.path.basename(path)
    try:
        with open(path, "rb") as f:
            corpus = parse_corpus(decode_utf8(f.read(), name), name)
    except UsageError as e:
        raise ValueError(str(e)) from None
    runs, notes = [], []
    for metric_name in metrics or discover_metrics():
        loaded = load_metric(metric_name)
        if not loaded.available:
            notes.append(f"{metric_name} skipped: {loaded.note}")
            continue
        if loaded.note:
            notes.append(f"{metric_name}: {loaded.note}")
        try:
            kwargs = build_compute_kwargs(loaded.metric, corpus, None, False)
            with loaded.lock:
                result = loaded.metric.compute(**kwargs)
        except Skip as e:
            notes.append(f"{metric_name} skipped: {e}")
            continue
        except ValueError as e:
            notes.append(f"{metric_name} failed: it rejected the input: {with_line_numbers(str(e), corpus)}")
            continue
        runs.append(MetricRun(name=metric_name, scores=corpus_scores(result), examples=result["examples"], model=loaded.model))
    if not runs:
        raise ValueError("no metric ran: " + "; ".join(notes))
    out_dir = out_dir or new_results_dir()
    stem = os.path.splitext(name)[0] or "input"
    results_path = os.path.join(out_dir, f"{stem}.scores.jsonl")
    write_output(results_path, corpus, runs)
    plot_path = os.path.join(out_dir, f"{stem}.scores.png")
    plot_scores(runs, len(corpus), plot_path)
    summary = [[run.name, key, round(float(value), 4)] for run in runs for key, value in run.scores.items()]
    return {"results": results_path, "plot": plot_path, "summary": summary, "notes": notes, "examples": len(corpus)}


def plot_scores(runs, n_examples: int, path: str) -> str:
    """A PNG with one bar chart of corpus scores per metric."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, len(runs), figsize=(4.2 * len(runs), 3.4), squeeze=False)
    for ax, run in zip(axes[0], runs):
        keys = list(run.scores)
        values = [float(run.scores[k]) for k in keys]
        bars = ax.barh(keys, values, color="#5c6bc0")
        ax.invert_yaxis()
        ax.set_xlim(0, max(1.0, max(values, default=1.0) * 1.1))
        ax.set_title(title(run.name))
        for bar, value in zip(bars, values):
            ax.text(bar.get_width() + 0.01, bar.get_y() + bar.get_height() / 2, f"{value:.3f}", va="center", fontsize=8)
    fig.suptitle(f"Corpus scores on {n_examples} example{'s' if n_examples != 1 else ''}")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ---------------------------------------------------------------------------
# The demo


def score_ui(source, layout, grid, text, prediction, reference):
    """The Score button: the summary, then one section per metric."""
    from d2t_metrics.spaces import error_html, read_table, warn

    names = discover_metrics()
    try:
        table = read_table(source, layout, grid, text)
        results = score_example(table, prediction, reference, names)
    except ValueError as e:
        warn(e)  # escaped: the message quotes the user's table
        return [error_html(str(e))] + [""] * len(names)
    return [summary_html(names, results)] + [panel_html(name, results[name]) for name in names]


def score_file_ui(file):
    from d2t_metrics.spaces import error_html, note_html, warn

    path = file if isinstance(file, str) or file is None else getattr(file, "name", None)
    try:
        out = score_file(path)
    except ValueError as e:
        warn(e)
        return error_html(str(e)), None, None, None
    notes = "".join(note_html(n) for n in out["notes"])
    status = f"<p>Scored {out['examples']} examples.</p>{notes}"
    return status, out["summary"], out["plot"], [out["results"], out["plot"]]


def build_demo():
    import gradio as gr

    from d2t_metrics.spaces import example_values, space_config, table_input

    names = discover_metrics()
    examples = load_examples()
    first = examples[0]
    repository = space_config(__file__).get("repository")
    project = f"[d2t-metrics]({repository})" if repository else "d2t-metrics"
    with gr.Blocks(title="d2t-metrics playground") as demo:
        gr.Markdown(
            "# d2t-metrics playground\nDoes the generated text say all of its input data, and only that? "
            f"Every semantic-accuracy metric of {project} on one input: "
            + ", ".join(f"**{title(n)}**" for n in names)
            + ". Models load on first use; a metric whose model is unavailable is skipped with a note."
        )
        with gr.Tabs():
            with gr.Tab("One example"):
                with gr.Row():
                    with gr.Column(scale=3):
                        table = table_input(first["table"], label="Input data (table)")
                    with gr.Column(scale=2):
                        prediction = gr.Textbox(label="Generated text", lines=3, value=first["prediction"], elem_id="d2t-prediction")
                        reference = gr.Textbox(
                            label="Reference text (optional; PARENT needs one)", lines=2,
                            value=(first.get("references") or [""])[0], elem_id="d2t-reference",
                        )
                        button = gr.Button("Score with every metric", variant="primary", elem_id="d2t-score")
                # The results, one under the other at full width: a summary of every
                # metric's score, then each metric's own section (its long parts collapsed),
                # readable from a phone to a wide screen.
                with gr.Column(elem_id="d2t-results"):
                    summary = gr.HTML("<p><i>Press Score to see every metric's score here, then each one's explanation.</i></p>",
                                      elem_id="d2t-summary")
                    panels = [gr.HTML("", elem_id=f"d2t-panel-{n}") for n in names]
                button.click(score_ui, inputs=table.inputs + [prediction, reference], outputs=[summary] + panels)
                gr.Examples(
                    [example_values(e["table"]) + [e["prediction"], (e.get("references") or [""])[0]] for e in examples],
                    inputs=table.example_inputs + [prediction, reference],
                    example_labels=[f"{e.get('id', i)}: {e.get('note', '')}"[:70] for i, e in enumerate(examples)],
                    label="Examples (from examples/examples.jsonl)",
                )
            with gr.Tab("Batch (JSONL)"):
                gr.Markdown(
                    "Upload a JSONL file in the command line's format: one JSON object per line, "
                    '`{"id"?, "prediction": str, "references"?: [str], "table"?: <any table form>, "source"?: str}`. '
                    "Every metric that can run on it scores it; download the per-example results "
                    "(the `d2t-metrics score --output` format) and a plot of the corpus scores."
                )
                with gr.Row():
                    with gr.Column():
                        upload = gr.File(label="Input JSONL", file_types=[".jsonl", ".json", ".txt"], type="filepath")
                        run = gr.Button("Score the file", variant="primary")
                        if examples_file():
                            gr.Examples([[examples_file()]], inputs=[upload], label="Example file")
                    with gr.Column():
                        status = gr.HTML()
                        downloads = gr.File(label="Per-example results (JSONL) and plot (PNG)", file_count="multiple", interactive=False)
                plot = gr.Image(label="Corpus scores per metric", type="filepath", interactive=False)
                summary = gr.Dataframe(headers=["metric", "score", "value"], label="Corpus scores", interactive=False)
                run.click(score_file_ui, inputs=upload, outputs=[status, summary, plot, downloads])
    return demo


if __name__ == "__main__":
    build_demo().launch()
