"""Gradio demo for semantic accuracy: enter a table (grid or pasted triples, E2E MR,
JSON) and a text, see the combined score and label, a verdict per table fact with
each component's evidence, and what the text says that no fact supports.

Run ``python metrics/semantic_accuracy/app.py`` (with d2t-metrics installed:
``pip install -e ".[all]"``); it also runs as the folder's Hub Space. Importing
this file launches nothing. The components' models are the project's
checkpoints where present (``checkpoints/`` of the checkout or the installed
package), else each component's own default (the papers' Hub models).
"""

import html
import os

from d2t_metrics.spaces import compute_inputs, example_values, metric_page, score_table_input

_HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "semantic_accuracy"

EXAMPLES = [
    ["Alan_Bean | birthPlace | Wheeler,_Texas\nAlan_Bean | occupation | Test_pilot",
     "Alan Bean was born in Wheeler, Texas and worked as a test pilot."],
    ["Alan_Bean | birthPlace | Wheeler,_Texas\nAlan_Bean | occupation | Test_pilot", "Alan Bean was born in Boston."],
    ["name[Blue Spice], eatType[pub], area[riverside], familyFriendly[yes]", "Blue Spice is a pub in the city centre."],
]
EXAMPLE_LABELS = ["WebNLG triples, faithful text", "WebNLG triples, wrong value and an omission", "E2E MR, wrong area"]

_COLOURS = {"OK": "#2e7d32", "omission": "#e65100", "hallucination": "#c62828", "omission+hallucination": "#6a1b9a"}
_VERDICT_COLOURS = {"stated": "#c8e6c9", "omitted": "#ffe0b2", "contradicted": "#ffcdd2", "unsure": "#eeeeee"}


def _cell(value) -> str:
    return html.escape("–" if value is None else str(value))


def _fact_row(fact: dict) -> str:
    nli, qa, fa = fact.get("nli"), fact.get("qa"), fact.get("fact_accuracy")
    nli_text = f"{nli['entailment']:.2f} “{nli['sentence']}”" if nli else None
    qa_text = "; ".join(f"{q['question']} → {q['predicted'] or '(no answer)'}" for q in qa["questions"]) if qa else None
    fa_text = None
    if fa:
        stated = fa.get("text_fact") or {}
        fa_text = fa["status"] + (f": “{stated.get('evidence', stated.get('object', ''))}”" if stated else "")
    colour = _VERDICT_COLOURS.get(fact["verdict"], "#eeeeee")
    return (f'<tr><td><code>{_cell(fact["fact"])}</code></td><td style="background:{colour}"><b>{_cell(fact["verdict"])}</b></td>'
            f"<td>{_cell(nli_text)}</td><td>{_cell(qa_text)}</td><td>{_cell(fa_text)}</td></tr>")


def _scroll(table_html: str) -> str:
    return f'<div class="d2t-scroll" style="overflow-x:auto;max-width:100%"><table style="margin:0">{table_html}</table></div>'


def render(example: dict) -> str:
    """HTML: score and label, the components' numbers, a table of facts and the unsupported claims."""
    label = example["label"]
    head = (f'<p><span style="background:{_COLOURS.get(label, "#555")};color:white;padding:3px 8px;border-radius:4px">'
            f"<b>{html.escape(label)}</b></span> score {example['score']:.3f} ({html.escape(example.get('label_basis', ''))})</p>")
    parts = ", ".join(f"{html.escape(k)} {v:.3f}" for k, v in example.get("components", {}).items())
    facts = "".join(_fact_row(f) for f in example.get("facts", []))
    facts = _scroll("<tr><th>fact</th><th>verdict</th><th>NLI entailment</th><th>QA about its value</th>"
                    f"<th>fact accuracy</th></tr>{facts}")
    claims = "".join(
        f"<tr><td>{_cell(c['by'])}</td><td>{_cell(c['status'])}</td>"
        f"<td>{_cell(c.get('answer') or ' | '.join(str(c.get(k, '')) for k in ('subject', 'relation', 'object')))}</td></tr>"
        for c in example.get("text_claims", []))
    claims = (f"<p>What the text says that no fact supports:</p>{_scroll('<tr><th>by</th><th>status</th><th>claim</th></tr>' + claims)}"
              if claims else "<p>No unsupported claim located.</p>")
    return head + f"<p><small>Components: {parts}</small></p>" + facts + claims


def explain(example, prediction, metric=None):
    """The explanation the playground shows: :func:`render`."""
    return render(example)


def default_model():
    """The folder of the project's checkpoints, or ``None`` (the components' own defaults)."""
    from d2t_metrics.locations import checkpoints_dir

    return checkpoints_dir()


_METRICS = {}


def get_metric(config: str = "fast"):
    """The metric of this folder with its components, loaded once per process and config."""
    import evaluate

    if config not in _METRICS:
        model = default_model()
        _METRICS[config] = evaluate.load(_HERE, config, **({"model": model} if model else {}))
    return _METRICS[config]


def score(table, text: str, config: str = "fast") -> str:
    """HTML for one table (any form ``parse_table`` reads) and text; bad input raises ``ValueError``."""
    res = get_metric(config).compute(**compute_inputs(text, table), per_example=True, show_progress=False)
    return render(res["examples"][0])


def score_ui(source, layout, grid, table_text, text, config):
    return score_table_input(score, (source, layout, grid, table_text), text, config)


def build_demo():
    import gradio as gr  # lazy: gradio, only to build the demo

    with gr.Blocks(title="Semantic accuracy") as demo:
        gr.Markdown(
            "# Semantic accuracy: the reference-less metrics combined\n"
            "NLI, fact accuracy and DAE (`fast`), plus Data-QuestEval (`default`, slower), weighed by a model fitted "
            f"out of fold on WebNLG 2017's ratings. Models: `{default_model() or 'each component’s default'}`."
        )
        with metric_page(EXAMPLES[0][0], EXAMPLES[0][1], table_label="Input data", action="Check", results_label="Verdict") as page:
            config = gr.Radio(["fast", "default"], value="fast", label="Components (fast: no Data-QuestEval)")
        options = [page.text, config]
        page.button.click(score_ui, inputs=page.table.inputs + options, outputs=page.output)
        gr.Examples([example_values(e[0]) + [e[1], "fast"] for e in EXAMPLES], inputs=page.table.example_inputs + options,
                    example_labels=EXAMPLE_LABELS)
    return demo


if __name__ == "__main__":
    build_demo().launch()
