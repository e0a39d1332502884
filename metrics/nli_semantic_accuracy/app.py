"""Gradio demo for NLI semantic accuracy: enter a table (grid or pasted triples,
E2E MR, JSON) and a text, see the 4-way label, the omitted facts and the
probabilities of every NLI check.

Run ``python metrics/nli_semantic_accuracy/app.py`` (with d2t-metrics installed:
``pip install -e ".[nli,models,spaces]"``); it also runs as the folder's Hub
Space. Importing this file launches nothing. The model is ``$NLI_MODEL`` (or
``$D2T_MODEL_NLI_SEMANTIC_ACCURACY``) if set, else the project's checkpoint
where present (``checkpoints/nli_semantic_accuracy`` of the checkout), else the
paper's roberta-large-mnli from the Hub.
"""

import html
import os

from d2t_metrics.spaces import compute_inputs, example_values, metric_page, resolve_model, score_table_input

_HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "nli_semantic_accuracy"
HUB_MODEL = "roberta-large-mnli"  # the paper's model

EXAMPLES = [
    [
        "Alan_Bean | birthPlace | Wheeler,_Texas\nAlan_Bean | occupation | Test_pilot",
        "Alan Bean was born in Wheeler, Texas and worked as a test pilot.",
    ],
    [
        "Alan_Bean | birthPlace | Wheeler,_Texas\nAlan_Bean | occupation | Test_pilot",
        "Alan Bean was born in Wheeler, Texas. He walked on the Moon.",
    ],
    ["name[Blue Spice], eatType[pub], area[riverside], familyFriendly[yes]", "Blue Spice is a family-friendly pub in the riverside area."],
    ["name[Blue Spice], eatType[coffee shop], area[city centre]", "Blue Spice is a coffee shop by the river."],
    [{"name": "Tomas Lindqvist", "birth_date": "4 March 1902", "occupation": "cartographer"}, "Tomas Lindqvist, born on 4 March 1902, was a painter."],
]

EXAMPLE_LABELS = [
    "WebNLG triples, faithful text", "WebNLG triples, a fact omitted and one added", "E2E MR, faithful text",
    "E2E MR, wrong area", "attribute-value dict, wrong occupation",
]


def default_model() -> str:
    """The model the demo loads (see the module docstring)."""
    model, _ = resolve_model(NAME, __file__, hub_default=HUB_MODEL, env=("NLI_MODEL",))
    return model


_COLOURS = {"OK": "#2e7d32", "omission": "#e65100", "hallucination": "#c62828", "omission+hallucination": "#6a1b9a"}


# Plain words, not emoji: they read the same where no emoji font is installed.
_YES = '<span style="color:#2e7d32;font-weight:bold">yes</span>'
_NO = '<span style="color:#c62828;font-weight:bold">no</span>'


def _probs(p: dict) -> str:
    return " ".join(f"{k[:1].upper()} {v:.3f}" for k, v in p.items())


# a fact sentence no template wrote is marked, so a reader knows which wording to doubt
_SOURCE_NOTE = {"learned": " <small>(learned verbalizer)</small>", "backoff": " <small>(back-off: no template)</small>"}


def render(example: dict) -> str:
    """HTML: the label, the omitted facts and a table of every NLI check."""
    label = example["label"]
    head = (
        f'<p><span style="background:{_COLOURS.get(label, "#555")};color:white;padding:3px 8px;border-radius:4px">'
        f"<b>{html.escape(label)}</b></span> score {example['score']:.3f} (the checks pooled), "
        f"confidence {example['confidence']:.3f} (lowest entailment probability over all checks)</p>"
    )
    omitted = "".join(
        f"<li><code>{html.escape(o['fact'])}</code>: “{html.escape(o['sentence'])}” ({_probs(o['probabilities'])})</li>"
        for o in example["omitted_facts"]
    )
    omitted = f"<p>Omitted facts:</p><ul>{omitted}</ul>" if omitted else "<p>No omitted facts.</p>"
    if example.get("hallucination"):
        omitted += "<p>Hallucination: the facts do not entail the text.</p>"
    written_by = dict(zip(example.get("facts", []), example.get("verbalized_by", [])))
    rows = "".join(
        f"<tr><td>{'fact → text' if c['type'] == 'omission' else 'facts → text'}</td>"
        f"<td>{html.escape(c['hypothesis'])}{_SOURCE_NOTE.get(written_by.get(c['hypothesis']) if c['type'] == 'omission' else None, '')}</td>"
        f"<td>{_probs(c['probabilities'])}</td>"
        f"<td>{_YES if c['entailed'] else _NO}</td></tr>"
        for c in example["checks"]
    )
    # In its own scrolling box: on a narrow screen the table scrolls instead of running past the edge.
    table = (
        '<div class="d2t-scroll" style="overflow-x:auto;max-width:100%"><table style="margin:0">'
        "<tr><th>check</th><th>hypothesis</th><th>probabilities</th><th>entailed</th></tr>"
        f"{rows}</table></div><p><small>Omission checks: the text is the premise, each fact sentence a hypothesis. "
        "Hallucination check: all fact sentences are the premise, the text the hypothesis.</small></p>"
    )
    return head + omitted + table


def explain(example, prediction, metric=None):
    """The explanation the playground shows: :func:`render`."""
    return render(example)


_METRICS = {}


def get_metric(config: str = "default"):
    """The metric of this folder with its model, loaded once per process and config."""
    import evaluate

    if config not in _METRICS:
        _METRICS[config] = evaluate.load(_HERE, config, model=default_model())
    return _METRICS[config]


def score(table, text: str, config: str = "default", lenient_restaurant: bool = False) -> str:
    """HTML for one table (any form ``parse_table`` reads) and text; bad input raises ``ValueError``."""
    res = get_metric(config).compute(
        **compute_inputs(text, table), per_example=True, show_progress=False, e2e_ignore_restaurant=lenient_restaurant
    )
    return render(res["examples"][0])


def score_ui(source, layout, grid, table_text, text, config, lenient_restaurant):
    return score_table_input(score, (source, layout, grid, table_text), text, config, lenient_restaurant, errors=(ValueError,))


def build_demo():
    import gradio as gr  # lazy: gradio, only to build the demo

    model, origin = resolve_model(NAME, __file__, hub_default=HUB_MODEL, env=("NLI_MODEL",))
    with gr.Blocks(title="NLI semantic accuracy") as demo:
        gr.Markdown(
            "# NLI semantic accuracy (Dušek & Kasner, 2020)\n"
            "Checks with an NLI model whether the text entails every fact (omissions) and the facts "
            f"entail the text (hallucinations). Model: `{model}` ({origin})."
        )
        with metric_page(EXAMPLES[0][0], EXAMPLES[0][1], table_label="Input data", action="Check", results_label="NLI checks") as page:
            with gr.Row():
                config = gr.Radio(["default", "backoff"], value="default", label="Templates (extracted/handcrafted, or back-off only)")
                lenient = gr.Checkbox(value=False, label="E2E: eatType[restaurant] is optional")
        options = [page.text, config, lenient]
        page.button.click(score_ui, inputs=page.table.inputs + options, outputs=page.output)
        gr.Examples(
            [example_values(e[0]) + [e[1], "default", False] for e in EXAMPLES],
            inputs=page.table.example_inputs + options,
            example_labels=EXAMPLE_LABELS,
        )
    return demo


if __name__ == "__main__":
    build_demo().launch()
