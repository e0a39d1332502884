"""Gradio demo for DAE: the generated text with each dependency arc coloured by
its entailment probability (red = not entailed, green = entailed).

Run ``python metrics/dae/app.py``; importing this file does not launch it.
"""

import html
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(os.path.dirname(_HERE))

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


def _colour(p: float) -> str:
    # red (0) → yellow (0.5) → green (1)
    r = int(220 if p < 0.5 else 220 - (p - 0.5) * 2 * 180)
    g = int(60 + p * 2 * 140 if p < 0.5 else 200)
    return f"rgb({r},{g},80)"


def render(example, words=None) -> str:
    """HTML: the text with each word coloured by the lowest probability of the
    arcs it takes part in (words in no arc stay plain), then the arcs, worst first."""
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
    rows = "".join(
        f'<tr><td>{html.escape(a["head"])}</td><td><code>{html.escape(a["relation"])}</code></td><td>{html.escape(a["child"])}</td>'
        f'<td style="background:{_colour(a["probability"])}">{a["probability"]:.3f}</td></tr>'
        for a in sorted(arcs, key=lambda a: a["probability"])
    )
    verdict = "all arcs entailed" if example["ok"] else f'{example["not_entailed"]} arc(s) not entailed'
    return (
        f'<p><b>DAE score {example["score"]:.3f}</b> (min {example["min_score"]:.3f}; {verdict})</p>'
        f"<p>{text or '<i>no arcs to judge</i>'}</p>"
        f"<table><tr><th>head</th><th>relation</th><th>child</th><th>P(entailed)</th></tr>{rows}</table>"
    )


_METRICS = {}


def score(source: str, prediction: str, config: str = "default") -> str:
    import evaluate

    if config not in _METRICS:
        _METRICS[config] = evaluate.load(_HERE, config)
    if not source.strip() or not prediction.strip():
        return "<p>Enter a source and a generated text.</p>"
    res = _METRICS[config].compute(predictions=[prediction], sources=[source], per_example=True, show_progress=False)
    words = [t.text for t in _METRICS[config].scorer.nlp(prediction)]
    return render(res["examples"][0], words)


def build_demo():
    import gradio as gr

    return gr.Interface(
        fn=score,
        inputs=[
            gr.Textbox(label="Source (input document, sentence or verbalized data)", lines=4),
            gr.Textbox(label="Generated text", lines=3),
            gr.Radio(["default", "rule"], value="default", label="Scorer (neural DAE or the rule-based arc overlap)"),
        ],
        outputs=gr.HTML(label="Arc entailment"),
        examples=[e + ["default"] for e in EXAMPLES],
        title="DAE: Dependency Arc Entailment",
        description="Each dependency arc of the generated text is judged entailed or not by the source "
        "(Goyal & Durrett, 2020). Red arcs are probably not supported.",
    )


if __name__ == "__main__":
    sys.path.insert(0, _ROOT)
    build_demo().launch()
