"""Gradio demo of fact accuracy (Goodrich et al., 2019): the facts extracted from
a generated text beside the facts of its table (or of a reference text), each
generated fact coloured supported (green), contradicted (red, with the value
the ground truth expects) or unverifiable (grey), and the ground-truth facts
the text does not state marked missing (orange).

Run ``python metrics/fact_accuracy/app.py`` (with d2t-metrics installed:
``pip install -e ".[facts,models,spaces]"``); it also runs as the folder's Hub
Space. Importing this file launches nothing; ``build_demo()`` builds the
``gr.Blocks`` and :func:`explain` renders one example (the playground calls
it). The extractors offered: ``end_to_end`` and ``relations`` where their
checkpoint is found (``$FACT_ACCURACY_MODEL`` or ``$D2T_MODEL_FACT_ACCURACY``
naming a checkpoint folder or the folder holding ``triples/`` and
``relations/``; else the project's ``checkpoints/fact_accuracy``; in a Space,
the published checkpoint repository named in ``d2t_space.json``), and the
model-free ``openie`` always.
"""

import html
import os

import d2t_metrics
from d2t_metrics.spaces import compute_inputs, example_values, metric_page, score_table_input, space_config

_HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "fact_accuracy"
SUBFOLDERS = {"end_to_end": "triples", "relations": "relations"}
ENV = ("FACT_ACCURACY_MODEL", "D2T_MODEL_FACT_ACCURACY")
# The metric's default (matching.DEFAULT_FUZZY_THRESHOLD; this file imports no sibling, so that the Space runs alone).
FUZZY_THRESHOLD = 0.85

EXAMPLES = [
    ["Alan_Bean | birthPlace | Wheeler,_Texas\nAlan_Bean | occupation | Test_pilot\nAlan_Bean | birthDate | 1932-03-15",
     "Alan Bean was born in Boston on March 15, 1932 and walked on the Moon.", ""],
    ["name[The Eagle], eatType[coffee shop], priceRange[cheap], near[Burger King]",
     "The Eagle is a cheap coffee shop near Burger King.", ""],
    ["Aarhus_Airport | cityServed | Aarhus\nAarhus_Airport | runwayLength | 2776.0",
     "Aarhus Airport serves the city of Aarhus. Its runway length is 2,776 metres.", ""],
]

VERDICTS = {
    "supported": ("fa-supported", "#c8e6c9", "supported"),
    "contradicted": ("fa-contradicted", "#ffcdd2", "contradicted"),
    "unverifiable": ("fa-unverifiable", "#eeeeee", "unverifiable"),
    "found": ("fa-found", "#c8e6c9", "stated"),
    "missing": ("fa-missing", "#ffe0b2", "missing"),
}


# ---------------------------------------------------------------------------
# Rendering


def _fact_cells(f) -> str:
    return (f"<td>{html.escape(str(f.get('subject', '')))}</td><td><code>{html.escape(str(f.get('relation', '')))}</code></td>"
            f"<td>{html.escape(str(f.get('object', '')))}</td>")


def _row(f, verdict: str, note: str = "") -> str:
    css, colour, label = VERDICTS[verdict]
    title = html.escape(str(f.get("evidence", "")), quote=True)
    return (f'<tr class="{css}" style="background:{colour}" title="{title}">{_fact_cells(f)}'
            f"<td><b>{label}</b>{(' ' + note) if note else ''}{_details(f)}</td></tr>")


# Fields of a fact shown in its row already (the triple) or by the verdict (the expected objects).
_SHOWN = {"subject", "relation", "object", "expected"}


def _details(f) -> str:
    """Any further field of a fact (its evidence span, a grounding flag, ...) in small print under the
    verdict, so that fields the metric adds show up without a change here."""
    parts = []
    for key, value in f.items():
        if key in _SHOWN or value is None or value == "" or value == []:
            continue
        shown = "“" + str(value) + "”" if key == "evidence" else str(value)
        parts.append(f"{html.escape(key.replace('_', ' '))}: {html.escape(shown)}")
    return "<br><small>" + "<br>".join(parts) + "</small>" if parts else ""


def _key(f):
    return (f.get("subject"), f.get("relation"), f.get("object"))


def _number(value) -> str:
    return "–" if value is None else f"{value:.3f}"


def _table(head: str, rows, empty: str) -> str:
    return f'<div class="d2t-scroll" style="overflow-x:auto;max-width:100%"><table style="margin:0">{head}{"".join(rows) or empty}</table></div>'


def explain(example, prediction, metric=None) -> str:
    """HTML for one example of ``compute(..., per_example=True)``: its score,
    the generated facts with their verdicts beside the ground-truth facts,
    found or missing."""
    verdict_of = {}
    for verdict in ("supported", "contradicted", "unverifiable"):
        for f in example.get(verdict) or []:
            verdict_of[_key(f)] = (verdict, f)
    generated = example.get("generated") or []
    gen_rows = []
    for f in generated:
        verdict, full = verdict_of.get(_key(f), ("unverifiable", f))
        note = ""
        if verdict == "contradicted":
            expected = ", ".join(html.escape(str(o)) for o in full.get("expected", []))
            note = f"(expected: {expected})"
        gen_rows.append(_row({**f, **full}, verdict, note))  # the verdict's entry may carry more (its evidence)
    missing = {_key(f) for f in example.get("missing") or []}
    truth_rows = [_row(f, "missing" if _key(f) in missing else "found") for f in example.get("ground_truth") or []]
    head = "<tr><th>subject</th><th>relation</th><th>object</th><th>verdict</th></tr>"
    empty = '<tr><td colspan="4"><i>none</i></td></tr>'
    source = example.get("ground_truth_source", "table")
    score = example.get("score")
    verdict = "no verifiable fact in the text" if score is None else f"accuracy <b>{_number(score)}</b>"
    counts = (f"{len(example.get('supported') or [])} supported, {len(example.get('contradicted') or [])} contradicted, "
              f"{len(example.get('unverifiable') or [])} unverifiable; {len(missing)} of {len(truth_rows)} ground-truth facts missing")
    return (
        f'<div class="fa-explanation"><p>{verdict} · recall <b>{_number(example.get("recall"))}</b> · {counts}</p>'
        # Side by side where there is room, one under the other on a phone; each table scrolls in its own box.
        '<div style="display:flex;gap:16px;flex-wrap:wrap">'
        f'<div style="flex:1;min-width:min(320px,100%);max-width:100%"><h4>Facts of the generated text</h4>{_table(head, gen_rows, empty)}</div>'
        f'<div style="flex:1;min-width:min(320px,100%);max-width:100%"><h4>Facts of the {html.escape(source)}</h4>{_table(head, truth_rows, empty)}</div>'
        "</div></div>"
    )


# ---------------------------------------------------------------------------
# Models and scoring


def _has_weights(path) -> bool:
    return bool(path) and any(os.path.isfile(os.path.join(str(path), f)) for f in ("adapter_model.safetensors", "model.safetensors"))


def _checkpoint_in(folder, extractor):
    """``folder`` itself when it is the extractor's checkpoint, else its ``triples/``/``relations/``."""
    if not folder:
        return None
    sub = os.path.join(str(folder), SUBFOLDERS[extractor])
    if _has_weights(sub):
        return sub
    if _has_weights(folder) and os.path.basename(os.path.normpath(str(folder))) == SUBFOLDERS[extractor]:
        return str(folder)
    return None


def _space_repo():
    """The published checkpoint repository ``d2t_space.json`` names (a staged Space), or ``None``."""
    return (space_config(__file__).get("checkpoints") or {}).get(NAME)


def _published(extractor):
    repo = _space_repo()
    if not repo:
        return None
    try:
        from huggingface_hub import snapshot_download  # lazy: huggingface_hub, only to fetch a checkpoint

        return _checkpoint_in(snapshot_download(repo_id=repo, repo_type="model"), extractor)
    except Exception:  # noqa: BLE001 - offline, or the repository is gone: no model
        return None


def default_model(extractor: str = "end_to_end"):
    """``(checkpoint folder or None, where it came from)`` for a learned extractor."""
    for var in ENV:
        value = os.environ.get(var)
        if value:
            path = _checkpoint_in(value, extractor) or (value if extractor == "end_to_end" and _has_weights(value) else None)
            return (path, f"${var}") if path else (None, f"${var} holds no {extractor} checkpoint")
    for root, origin in ((d2t_metrics.checkpoint_path(NAME), "the project's checkpoint"),
                         (os.path.join(os.path.dirname(os.path.dirname(_HERE)), "checkpoints", NAME), "the project's checkpoint")):
        path = _checkpoint_in(root, extractor)
        if path:
            return os.path.abspath(path), origin
    return None, f"no {extractor} checkpoint (checkpoints/{NAME}/{SUBFOLDERS[extractor]})"


def available_configs():
    """The configs this demo can run here, learned ones first (checkpoints are looked up, not loaded)."""
    configs = [c for c in ("end_to_end", "relations") if default_model(c)[0] or _space_repo()]
    return configs + ["openie"]


_METRICS = {}


def get_metric(config: str = "openie"):
    """The metric of this folder for a config, loaded once per process."""
    import evaluate

    if config not in _METRICS:
        kwargs = {}
        if config != "openie":
            model, reason = default_model(config)
            if model is None:
                model = _published(config)
            if model is None:
                from d2t_metrics.hub import ModelNotAvailableError

                raise ModelNotAvailableError(f"{reason}; use the model-free config 'openie'")
            kwargs["model"] = model
        metric = evaluate.load(_HERE, config, **kwargs)
        metric.download_and_prepare()  # the extractor loads now, once
        _METRICS[config] = metric
    return _METRICS[config]


def score(table, prediction: str, reference: str = "", config: str = "openie", ground_truth: str = "table",
          fuzzy_threshold=FUZZY_THRESHOLD) -> str:
    """HTML for one input; bad input raises ``ValueError``."""
    inputs = compute_inputs(prediction, table, reference)
    if ground_truth == "references" and "references" not in inputs:
        raise ValueError("enter a reference text to take the ground-truth facts from")
    metric = get_metric(config)
    res = metric.compute(**inputs, per_example=True, show_progress=False, ground_truth=ground_truth,
                         fuzzy_threshold=fuzzy_threshold or None)
    return explain(res["examples"][0], prediction, metric)


def score_ui(source, layout, grid, text, prediction, reference, config, ground_truth, fuzzy):
    return score_table_input(score, (source, layout, grid, text), prediction, reference, config, ground_truth,
                             float(fuzzy) if fuzzy else None)


def build_demo():
    import gradio as gr  # lazy: gradio, only to build the demo

    configs = available_configs()
    note = ("Learned extractors found: " + ", ".join(f"`{c}`" for c in configs[:-1]) + "." if len(configs) > 1
            else "No learned extractor checkpoint here: the model-free OpenIE baseline only.")
    with gr.Blocks(title="Fact accuracy") as demo:
        gr.Markdown(
            "# Fact accuracy\nFacts (subject, relation, object) are extracted from the generated text and checked "
            "against the table's facts (or a reference text's): of the facts whose subject and relation the ground "
            "truth also has, the share with the same object is the accuracy (Goodrich et al., KDD 2019). "
            f"Green: supported; red: contradicted; grey: unverifiable; orange: ground-truth facts not stated. {note}"
        )
        with metric_page(EXAMPLES[0][0], EXAMPLES[0][1], results_label="Facts") as page:
            reference = gr.Textbox(label="Reference text(s), one per line (optional)", lines=2, value=EXAMPLES[0][2])
            with gr.Row():
                config = gr.Radio(configs, value=configs[0], label="Extractor")
                ground_truth = gr.Radio(["table", "references"], value="table", label="Ground truth")
            fuzzy = gr.Slider(0.0, 1.0, value=FUZZY_THRESHOLD, step=0.05, label="Fuzzy matching threshold (0 = exact after normalization)")
        options = [page.text, reference, config, ground_truth, fuzzy]
        page.button.click(score_ui, inputs=[*page.table.inputs, *options], outputs=page.output)
        gr.Examples([example_values(e[0]) + [e[1], e[2], configs[0], "table", FUZZY_THRESHOLD] for e in EXAMPLES],
                    inputs=[*page.table.example_inputs, *options], example_labels=["WebNLG triples", "E2E MR", "numbers with units"])
    return demo


if __name__ == "__main__":
    build_demo().launch()
