"""Gradio demo of Data-QuestEval (Rebuffel et al., 2021): the questions asked
about the table and answered on the text (green when the text gives the
table's value, red when it does not: an omission), and the questions asked
about the text and answered on the table (red: a claim the table does not
support), each with its expected and predicted answer and its scores.

Run ``python metrics/data_questeval/app.py`` (with d2t-metrics installed:
``pip install -e ".[models,spaces]"``); it also runs as the folder's Hub
Space. Importing this file launches nothing; ``build_demo()`` builds the
``gr.Blocks`` and :func:`explain` renders one example (the playground calls
it). The models: ``$DATA_QUESTEVAL_MODEL`` or ``$D2T_MODEL_DATA_QUESTEVAL``
(a folder holding ``text_qg/``, ``text_qa/``, ``table_qg/``, ``table_qa/``),
else the project's ``checkpoints/data_questeval``, else QuestEval's T5
checkpoints from the Hub, else the published checkpoint repository named in
``d2t_space.json``.
"""

import html
import os

from d2t_metrics.spaces import compute_inputs, example_values, metric_page, model_candidates, score_table_input

_HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "data_questeval"
ENV = ("DATA_QUESTEVAL_MODEL",)

EXAMPLES = [
    ["Alan_Bean | birthPlace | Wheeler,_Texas\nAlan_Bean | occupation | Test_pilot",
     "Alan Bean was born in Boston and worked as a test pilot.", ""],
    ["name[The Eagle], eatType[coffee shop], priceRange[cheap], near[Burger King]",
     "The Eagle is a cheap coffee shop near Burger King.", ""],
    ["(29075)_1950_da | discoverer | carl_a._wirtanen", "1950 da was discovered by carl.", ""],
]

GOOD = "#c8e6c9"
BAD = "#ffcdd2"


def _number(value) -> str:
    return "–" if value is None else f"{value:.3f}"


def _rows(questions, threshold: float = 0.5) -> str:
    rows = []
    for q in questions:
        colour = GOOD if q.get("score", 0) >= threshold else BAD
        predicted = q.get("predicted") or "<i>no answer</i>"
        if q.get("predicted"):
            predicted = html.escape(str(predicted))
        rows.append(
            f'<tr style="background:{colour}"><td>{html.escape(str(q.get("question", "")))}</td>'
            f'<td>{html.escape(str(q.get("answer", "")))}</td><td>{predicted}</td>'
            f'<td>{_number(q.get("answerability"))}</td><td>{_number(q.get("f1"))}</td>'
            f'<td>{_number(q.get("bertscore"))}</td><td><b>{_number(q.get("score"))}</b></td></tr>')
    return "".join(rows) or '<tr><td colspan="7"><i>no question</i></td></tr>'


THRESHOLD = 0.5  # a question scoring below it counts against the text (as ``missing`` and ``unsupported`` do)
FAILED_SHOWN = 8  # failed questions in view; the others are one click away
HEAD = ("<tr><th>question</th><th>expected</th><th>answer found</th><th>answerability</th><th>F1</th>"
        "<th>BERTScore</th><th>score</th></tr>")
SHORT_HEAD = "<tr><th>question</th><th>expected</th><th>answer found</th><th>score</th></tr>"


def _table(rows: str, head: str = HEAD) -> str:
    """A question table in its own scrolling box: seven columns do not fit a phone."""
    return f'<div class="d2t-scroll" style="overflow-x:auto;max-width:100%"><table style="margin:0">{head}{rows}</table></div>'


def _failed(q) -> bool:
    return (q.get("score") or 0) < THRESHOLD


def _failed_rows(failed) -> str:
    """Compact rows (question, expected, found, score) of failed questions, each tagged with what it was asked about."""
    rows = []
    for about, q in failed:
        predicted = html.escape(str(q["predicted"])) if q.get("predicted") else "<i>no answer</i>"
        rows.append(f'<tr style="background:{BAD}"><td>{html.escape(str(q.get("question", "")))}<br><small>{html.escape(about)}</small></td>'
                    f'<td>{html.escape(str(q.get("answer", "")))}</td><td>{predicted}</td><td><b>{_number(q.get("score"))}</b></td></tr>')
    return "".join(rows)


def explain(example, prediction, metric=None) -> str:
    """HTML for one example of ``compute(..., per_example=True)``: its scores,
    the questions that failed (those a reader checks first: the first
    :data:`FAILED_SHOWN` in view, the others collapsed), then every question
    asked both ways, collapsed (there can be dozens)."""
    parts = [f'<div class="dqe-explanation"><p>score <b>{_number(example.get("score"))}</b> · precision '
             f'<b>{_number(example.get("precision"))}</b> · recall <b>{_number(example.get("recall"))}</b> '
             f'(from the {html.escape(str(example.get("source", "table")))})</p>']
    if example.get("read_as") and example["read_as"] != prediction:
        parts.append("<p>Read as (one casing, the table's values as the table writes them): "
                     f"{html.escape(str(example['read_as']))}</p>")
    if example.get("missing"):
        parts.append("<p>Table values the text does not give: " + ", ".join(html.escape(str(m)) for m in example["missing"]) + "</p>")
    if example.get("unsupported"):
        parts.append("<p>Answers of the text the table does not support: "
                     + ", ".join(html.escape(str(m)) for m in example["unsupported"]) + "</p>")
    groups = []  # (heading, what the questions were asked about, questions) per source and direction
    for src in example.get("sources") or []:
        name = str(src.get("source", "table"))
        groups.append((f"Questions about the {name}, answered on the text (recall {_number(src.get('recall'))})",
                       f"about the {name}, answered on the text", src.get("from_source") or []))
        groups.append((f"Questions about the text, answered on the {name} (precision {_number(src.get('precision'))})",
                       f"about the text, answered on the {name}", src.get("from_text") or []))
    total = sum(len(qs) for _, _, qs in groups)
    failed = [(about, q) for _, about, qs in groups for q in qs if _failed(q)]
    parts.append(f"<h4>Questions that failed ({len(failed)} of {total}; score &lt; {THRESHOLD})</h4>")
    if failed:
        parts.append(_table(_failed_rows(failed[:FAILED_SHOWN]), SHORT_HEAD))
        if len(failed) > FAILED_SHOWN:
            parts.append(f"<details><summary>{len(failed) - FAILED_SHOWN} more failed questions</summary>"
                         f"{_table(_failed_rows(failed[FAILED_SHOWN:]), SHORT_HEAD)}</details>")
    else:
        parts.append("<p>None: every answer was found.</p>")
    parts.append(f"<details><summary>All {total} questions, both ways, with their scores</summary>")
    parts.extend(f"<h4>{html.escape(heading)}</h4>{_table(_rows(qs))}" for heading, _, qs in groups)
    parts.append("</details></div>")
    return "".join(parts)


# ---------------------------------------------------------------------------
# Models and scoring


def default_model():
    """``(model folder or hub default, where it came from)``; ``(None, reason)`` when there is none."""
    for model, origin in model_candidates(NAME, __file__, env=ENV):
        return model, origin
    return None, "no checkpoints/data_questeval here and no published checkpoint reachable"


_METRICS = {}


def get_metric():
    """The metric of this folder with its four models, loaded once per process
    (QuestEval's T5 checkpoints from the Hub when no project checkpoint is found)."""
    import evaluate

    if "metric" not in _METRICS:
        model, _ = default_model()
        metric = evaluate.load(_HERE, **({"model": model} if model else {}))
        metric.download_and_prepare()  # the four models load now, once
        _METRICS["metric"] = metric
    return _METRICS["metric"]


def score(table, prediction: str, reference: str = "") -> str:
    """HTML for one input; bad input raises ``ValueError``."""
    res = get_metric().compute(**compute_inputs(prediction, table, reference), per_example=True, show_progress=False)
    return explain(res["examples"][0], prediction)


def score_ui(source, layout, grid, text, prediction, reference):
    return score_table_input(score, (source, layout, grid, text), prediction, reference)


def build_demo():
    import gradio as gr  # lazy: gradio, only to build the demo

    model, origin = default_model()
    note = f"Models: {origin}." if model else "No project checkpoint here: QuestEval's T5 models are loaded from the Hub."
    with gr.Blocks(title="Data-QuestEval") as demo:
        gr.Markdown(
            "# Data-QuestEval\nQuestions are generated about every value of the table and answered on the text "
            "(recall: what the text leaves out), and about every entity and noun phrase of the text and answered "
            "on the table (precision: what the table does not support). Each answer is compared with the expected "
            "one by F1 and BERTScore, with the QA model's answerability; no reference needed (Rebuffel et al., 2021). "
            f"Green: the answer is found (score ≥ 0.5); red: it is not. {note}"
        )
        with metric_page(EXAMPLES[0][0], EXAMPLES[0][1], results_label="Questions and answers") as page:
            reference = gr.Textbox(label="Reference text(s), one per line (optional: further sources)", lines=2,
                                   value=EXAMPLES[0][2])
        page.button.click(score_ui, inputs=[*page.table.inputs, page.text, reference], outputs=page.output)
        gr.Examples([example_values(e[0]) + [e[1], e[2]] for e in EXAMPLES], inputs=[*page.table.example_inputs, page.text, reference],
                    example_labels=["WebNLG triples", "E2E MR", "QuestEval's example"])
    return demo


if __name__ == "__main__":
    build_demo().launch()
