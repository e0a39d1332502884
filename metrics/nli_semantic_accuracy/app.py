"""Gradio demo for NLI semantic accuracy: enter triples (or an E2E MR) and a text,
see the 4-way label, the omitted facts and the probabilities of every NLI check.

Run ``python metrics/nli_semantic_accuracy/app.py``; importing this file does not
launch it. The model is ``$NLI_MODEL`` if set, else the project's checkpoint
(``checkpoints/nli_semantic_accuracy``) when present, else roberta-large-mnli.
"""

import html
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(os.path.dirname(_HERE))

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
]


def default_model() -> str:
    env = os.environ.get("NLI_MODEL")
    if env:
        return env
    local = os.path.join(_ROOT, "checkpoints", "nli_semantic_accuracy")
    return local if os.path.isfile(os.path.join(local, "model.safetensors")) else "roberta-large-mnli"


_COLOURS = {"OK": "#2e7d32", "omission": "#e65100", "hallucination": "#c62828", "omission+hallucination": "#6a1b9a"}


def _probs(p: dict) -> str:
    return " ".join(f"{k[:1].upper()} {v:.3f}" for k, v in p.items())


def render(example: dict) -> str:
    """HTML: the label, the omitted facts and a table of every NLI check."""
    label = example["label"]
    head = (
        f'<p><span style="background:{_COLOURS.get(label, "#555")};color:white;padding:3px 8px;border-radius:4px">'
        f"<b>{html.escape(label)}</b></span> confidence {example['confidence']:.3f} "
        "(lowest entailment probability over all checks)</p>"
    )
    omitted = "".join(
        f"<li><code>{html.escape(o['fact'])}</code>: “{html.escape(o['sentence'])}” ({_probs(o['probabilities'])})</li>"
        for o in example["omitted_facts"]
    )
    omitted = f"<p>Omitted facts:</p><ul>{omitted}</ul>" if omitted else "<p>No omitted facts.</p>"
    rows = "".join(
        f"<tr><td>{'fact → text' if c['type'] == 'omission' else 'facts → text'}</td>"
        f"<td>{html.escape(c['hypothesis'])}</td><td>{_probs(c['probabilities'])}</td>"
        f"<td>{'✅' if c['entailed'] else '❌'}</td></tr>"
        for c in example["checks"]
    )
    table = (
        "<table><tr><th>check</th><th>hypothesis</th><th>probabilities</th><th>entailed</th></tr>"
        f"{rows}</table><p><small>Omission checks: the text is the premise, each fact sentence a hypothesis. "
        "Hallucination check: all fact sentences are the premise, the text the hypothesis.</small></p>"
    )
    return head + omitted + table


_METRICS = {}


def score(table: str, text: str, config: str = "default", lenient_restaurant: bool = False) -> str:
    import evaluate

    if not table.strip() or not text.strip():
        return "<p>Enter the input data and a generated text.</p>"
    if config not in _METRICS:
        _METRICS[config] = evaluate.load(_HERE, config, model=default_model())
    try:
        res = _METRICS[config].compute(
            predictions=[text], tables=[table], per_example=True, show_progress=False, e2e_ignore_restaurant=lenient_restaurant
        )
    except ValueError as e:
        return f"<p style='color:#c62828'>{html.escape(str(e))}</p>"
    return render(res["examples"][0])


def build_demo():
    import gradio as gr

    return gr.Interface(
        fn=score,
        inputs=[
            gr.Textbox(label="Input data: WebNLG triples 'subject | predicate | object', one per line, or an E2E MR", lines=4),
            gr.Textbox(label="Generated text", lines=3),
            gr.Radio(["default", "backoff"], value="default", label="Templates (extracted/handcrafted, or back-off only)"),
            gr.Checkbox(value=False, label="E2E: eatType[restaurant] is optional"),
        ],
        outputs=gr.HTML(label="NLI checks"),
        examples=[e + ["default", False] for e in EXAMPLES],
        title="NLI semantic accuracy (Dušek & Kasner, 2020)",
        description="Checks with an NLI model whether the text entails every fact (omissions) and the facts "
        "entail the text (hallucinations).",
    )


if __name__ == "__main__":
    sys.path.insert(0, _ROOT)
    build_demo().launch()
