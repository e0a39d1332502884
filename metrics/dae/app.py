"""Gradio demo for DAE: the generated text with each dependency arc coloured by
its entailment probability (red = not entailed, green = entailed). The source
is a text, or a table (grid or pasted triples, E2E MR, JSON) that DAE
verbalizes into fact sentences.

Run ``python metrics/dae/app.py`` (with d2t-metrics installed:
``pip install -e ".[dae,models,spaces]"``); it also runs as the folder's Hub
Space. Importing this file launches nothing. The neural model is
``$DAE_MODEL`` (or ``$D2T_MODEL_DAE``) if set, else the project's checkpoint
(``checkpoints/dae`` of the checkout, or in a Space the published checkpoint
repository named in ``d2t_space.json``); the paper's weights are not on the Hub.
Without a model the demo offers the rule-based config only.
"""

import html
import os

from d2t_metrics.spaces import compute_inputs, example_values, read_table, resolve_model, shown_error, table_input

_HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "dae"

SOURCE_TEXT, SOURCE_TABLE = "text", "table"

EXAMPLES = [
    [
        "the council reported that residents who use the new bus service made up half of its passengers last year.",
        "residents who use the new bus service made up its passengers last year.",
    ],
    [
        "the singer has spoken of meeting the mayor of leeds but says she rarely visits the city.",
        "the mayor of leeds rarely visits the city.",
    ],
    ["Alan Bean was born in Wheeler, Texas, and worked as a test pilot.", "Alan Bean was born in Texas and worked as an astronaut."],
]
TABLE_EXAMPLES = [
    ["Alan_Bean | birthPlace | Wheeler,_Texas\nAlan_Bean | occupation | Test_pilot", "Alan Bean was born in Texas and worked as an astronaut."],
    ["name[The Copper Kettle], eatType[pub], priceRange[cheap]", "The Copper Kettle is an expensive pub."],
]


def _colour(p: float) -> str:
    # red (0) → yellow (0.5) → green (1)
    r = int(220 if p < 0.5 else 220 - (p - 0.5) * 2 * 180)
    g = int(60 + p * 2 * 140 if p < 0.5 else 200)
    return f"rgb({r},{g},80)"


def render(example, words=None) -> str:
    """HTML: the text with each word coloured by the lowest probability of the
    arcs it takes part in (words in no arc stay plain), the arcs not entailed
    (below 0.5), then every arc, worst first, collapsed."""
    arcs = example["arcs"]
    word_min = {}
    for a in arcs:
        for i, w in ((a["head_index"], a["head"]), (a["child_index"], a["child"])):
            word_min[i] = (min(word_min.get(i, (1.0, w))[0], a["probability"]), w)
    if words is None:
        words = [w for _, (_, w) in sorted(word_min.items())]
        word_min = {k: v for k, (_, v) in enumerate(sorted(word_min.items()))}
    parts = []
    for i, w in enumerate(words):
        if i in word_min:
            p = word_min[i][0]
            parts.append(f'<span style="background:{_colour(p)};padding:2px 4px;border-radius:4px" title="P(entailed) {p:.2f}">{html.escape(w)}</span>')
        else:
            parts.append(html.escape(w))
    text = " ".join(parts)
    ordered = sorted(arcs, key=lambda a: a["probability"])
    bad = [a for a in ordered if a["probability"] < 0.5]
    if example.get("no_arcs") or not arcs:
        verdict = "no arcs to judge"
    else:
        verdict = "all arcs entailed" if example["ok"] else f'{example["not_entailed"]} arc(s) not entailed'
    low = example.get("min_score", example.get("min", 0.0))
    # The arcs below 0.5 stay in view; the full list (as long as the text) is collapsed.
    shown = f"<p>Arcs not entailed by the source:</p>{_arc_table(bad)}" if bad else ""
    if example.get("source_score") is not None:  # direction="both": the source's arcs were checked against the text too
        head = (f'<p><b>DAE score {example["score"]:.3f}</b>: {html.escape(example["label"])} (the lower of the '
                f'text\'s arcs against the source, {example["text_score"]:.3f}, min {low:.3f}; {verdict}; and the '
                f'source\'s arcs against the text, {example["source_score"]:.3f})</p>')
    else:
        head = f'<p><b>DAE score {example["score"]:.3f}</b> (min {low:.3f}; {verdict})</p>'
    facts = _fact_table(example["facts"]) if example.get("facts") else ""
    return (
        f"{head}<p>{text or '<i>no arcs to judge</i>'}</p>{shown}{facts}"
        f"<details><summary>All {len(arcs)} arcs with their P(entailed), worst first</summary>{_arc_table(ordered)}</details>"
    )


def _fact_table(facts) -> str:
    """Per fact of the table: its sentence, whether the text says it (its arcs' P(entailed)
    given the text, pooled) and its arcs, collapsed."""
    rows = []
    for f in facts:
        p = f["score"]
        verdict = "no arc to judge" if p is None else "said" if f["covered"] else "left out or changed"
        cell = "" if p is None else f' style="background:{_colour(p)}"'
        rows.append(f"<tr><td>{html.escape(f['sentence'])}</td><td{cell}>{'' if p is None else f'{p:.3f}'}</td>"
                    f"<td>{verdict}</td><td><details><summary>{len(f['arcs'])} arcs</summary>{_arc_table(f['arcs'])}"
                    "</details></td></tr>")
    return ("<p>Each fact of the table, its sentence's arcs checked against the text:</p>"
            '<div class="d2t-scroll" style="overflow-x:auto;max-width:100%"><table style="margin:0">'
            f"<tr><th>fact</th><th>P(entailed), pooled</th><th>verdict</th><th>arcs</th></tr>{''.join(rows)}</table></div>")


def _arc_table(arcs) -> str:
    """A scrollable table of arcs (those below 0.5, not entailed, in bold)."""
    rows = "".join(
        f'<tr style="font-weight:{"bold" if a["probability"] < 0.5 else "normal"}"><td>{html.escape(a["head"])}</td>'
        f'<td><code>{html.escape(a["relation"])}</code></td><td>{html.escape(a["child"])}</td>'
        f'<td style="background:{_colour(a["probability"])}">{a["probability"]:.3f}</td></tr>'
        for a in arcs
    )
    return ('<div class="d2t-scroll" style="overflow-x:auto;max-width:100%"><table style="margin:0">'
            f"<tr><th>head</th><th>relation</th><th>child</th><th>P(entailed)</th></tr>{rows}</table></div>")


def words_of(metric, prediction):
    """The prediction's tokens as the metric's spaCy pipeline splits them (arc indices refer to them)."""
    nlp = getattr(metric, "nlp", None) or getattr(getattr(metric, "scorer", None), "nlp", None)
    return [t.text for t in nlp(prediction)] if nlp is not None else None


def explain(example, prediction, metric=None):
    """The explanation the playground shows: :func:`render` over the prediction's words."""
    return render(example, words_of(metric, prediction))


def default_model():
    """``(model path or None, where it came from)`` for the neural config."""
    return resolve_model(NAME, __file__, env=("DAE_MODEL",))


_METRICS = {}


def get_metric(config: str = "default"):
    """The metric of this folder, loaded once per process and config; the default
    config raises ``ModelNotAvailableError`` (an ``OSError``) without a model."""
    import evaluate

    if config not in _METRICS:
        kwargs = {}
        if config != "rule":
            model, reason = default_model()
            if model is None:
                from d2t_metrics.hub import ModelNotAvailableError

                raise ModelNotAvailableError(f"{reason}; use the rule-based config")
            kwargs["model"] = model
        metric = evaluate.load(_HERE, config, **kwargs)
        metric.download_and_prepare()  # loads spaCy and the model now, once
        _METRICS[config] = metric
    return _METRICS[config]


def score(source, prediction: str, config: str = "default") -> str:
    """HTML for one source and prediction; bad input raises ``ValueError``. A string
    source is a text; a list or dict is a table (``score_table`` takes any table form)."""
    if (isinstance(source, str) and not source.strip()) or not str(prediction or "").strip():
        raise ValueError("enter a source and a generated text")
    if not isinstance(source, str):
        return score_table(source, prediction, config)
    metric = get_metric(config)
    res = metric.compute(predictions=[prediction], sources=[source], per_example=True, show_progress=False)
    return render(res["examples"][0], words_of(metric, prediction))


def score_table(table, prediction: str, config: str = "default") -> str:
    """HTML for a table source (any form ``parse_table`` reads, verbalized by DAE) and a prediction."""
    inputs = compute_inputs(prediction, table)
    metric = get_metric(config)
    res = metric.compute(**inputs, per_example=True, show_progress=False)
    return render(res["examples"][0], words_of(metric, prediction))


def score_ui(kind, source_text, t_source, t_layout, t_grid, t_text, prediction, config):
    try:
        if kind == SOURCE_TABLE:
            return score_table(read_table(t_source, t_layout, t_grid, t_text), prediction, config)
        return score(source_text, prediction, config)
    except (ValueError, OSError) as e:
        return shown_error(e)


def _label(text: str, width: int = 60) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def build_demo():
    import gradio as gr  # lazy: gradio, only to build the demo

    model, origin = default_model()
    configs = ["default", "rule"] if model else ["rule"]
    note = f"Neural model: `{model}` ({origin})." if model else f"No neural model here ({origin}): the rule-based config only."
    with gr.Blocks(title="DAE") as demo:
        gr.Markdown(
            "# DAE: Dependency Arc Entailment\nEach dependency arc of the generated text is judged entailed or not by "
            "the source (Goyal & Durrett, 2020). Red arcs are probably not supported. A table is verbalized into "
            f"one sentence per fact first. {note}"
        )
        with gr.Row():
            with gr.Column():
                kind = gr.Radio([SOURCE_TEXT, SOURCE_TABLE], value=SOURCE_TEXT, label="Source")
                source_text = gr.Textbox(label="Source (input document, sentence or verbalized data)", lines=4, value=EXAMPLES[0][0])
                with gr.Column(visible=False) as table_box:
                    table = table_input(TABLE_EXAMPLES[0][0], label="Source table")
                prediction = gr.Textbox(label="Generated text", lines=3, value=EXAMPLES[0][1])
                config = gr.Radio(configs, value=configs[0], label="Scorer (neural DAE or the rule-based arc overlap)")
                button = gr.Button("Score", variant="primary")
            with gr.Column():
                output = gr.HTML(label="Arc entailment")
        kind.change(
            lambda k: (gr.update(visible=k == SOURCE_TEXT), gr.update(visible=k == SOURCE_TABLE)),
            kind, [source_text, table_box], show_progress="hidden",
        )
        button.click(score_ui, inputs=[kind, source_text, *table.inputs, prediction, config], outputs=output)
        gr.Examples([[SOURCE_TEXT, e[0], e[1], configs[0]] for e in EXAMPLES], inputs=[kind, source_text, prediction, config],
                    label="Examples with a source text", example_labels=[_label(e[1]) for e in EXAMPLES])
        gr.Examples([[SOURCE_TABLE, *example_values(e[0]), e[1], configs[0]] for e in TABLE_EXAMPLES],
                    inputs=[kind, *table.example_inputs, prediction, config], label="Examples with a source table",
                    example_labels=[_label(e[1]) for e in TABLE_EXAMPLES])
    return demo


if __name__ == "__main__":
    build_demo().launch()
