"""Gradio demo of PARENT: paste a table, reference(s) and a prediction; see P/R/F and the n-grams behind them.

Run ``python metrics/parent/app.py``. Importing this file builds the demo
(``demo``) without launching it.
"""

import os
import sys

import evaluate
import gradio as gr

HERE = os.path.dirname(os.path.abspath(__file__))
# Running from a checkout: make d2t_metrics importable without installing it.
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

EXAMPLES = [
    [
        "name[Blue Spice], eatType[coffee shop], area[riverside]",
        "Blue Spice is a coffee shop by the river.\nAt the riverside, there is a coffee shop called Blue Spice.",
        "Blue Spice is a cheap coffee shop in the riverside area.",
        "nltk",
        True,
        0.5,
    ],
    [
        "Alan_Bean | occupation | Test_pilot\nAlan_Bean | birthPlace | Wheeler,_Texas",
        "Alan Bean, born in Wheeler, Texas, was a test pilot.",
        "Alan Bean was a test pilot who was born in Wheeler, Texas and walked on the moon.",
        "nltk",
        True,
        0.5,
    ],
]

COLORS = {"in reference": "#7fc97f", "entailed by table": "#beaed4", "neither": "#fdc086"}

_metric = None


def get_metric():
    global _metric
    if _metric is None:
        _metric = evaluate.load(HERE)
    return _metric


def _table_input(text):
    """E2E MRs and "s | p | o" triple strings are read as is; several triples go one per line."""
    text = text.strip()
    if "|" in text:
        return [line.strip() for line in text.splitlines() if line.strip()]
    return text


def _unigram_labels(ngrams):
    labels = {}
    for row in ngrams:
        if row["order"] != 1:
            continue
        if row["reference_count"] > 0:
            labels[row["ngram"]] = "in reference"
        elif row["table_entailment"] >= 1.0:
            labels[row["ngram"]] = "entailed by table"
        else:
            labels[row["ngram"]] = "neither"
    return labels


def score(table, references, prediction, tokenizer, auto_lambda, lambda_weight):
    refs = [r.strip() for r in references.splitlines() if r.strip()]
    if not table.strip() or not refs:
        raise gr.Error("Give a table and at least one reference.")
    try:
        result = get_metric().compute(
            predictions=[prediction],
            references=[refs],
            tables=[_table_input(table)],
            tokenizer=tokenizer,
            lambda_weight=None if auto_lambda else float(lambda_weight),
            return_ngrams=True,
            show_progress=False,
        )
    except ValueError as error:
        raise gr.Error(str(error))
    ex = result["examples"][0]
    summary = (
        f"**PARENT F = {ex['f1']:.4f}** (precision {ex['precision']:.4f}, recall {ex['recall']:.4f})\n\n"
        f"Recall = reference recall {ex['reference_recall']:.4f}^(1−λ) × table recall {ex['table_recall']:.4f}^λ "
        f"with λ = {ex['lambda']:.3f}. Best reference: #{ex['reference_index'] + 1}."
    )
    labels = _unigram_labels(ex["prediction_ngrams"])
    from d2t_metrics.tokenize import get_tokenizer

    tokens = get_tokenizer(tokenizer)(prediction)
    highlighted = [(tok + " ", labels.get(tok, "neither")) for tok in tokens]
    pred_rows = [
        [r["ngram"], r["order"], r["count"], round(r["table_entailment"], 3), r["reference_count"]]
        for r in ex["prediction_ngrams"]
    ]
    ref_rows = [
        [r["ngram"], r["order"], r["count"], round(r["table_entailment"], 3), r["prediction_count"]]
        for r in ex["reference_ngrams"]
    ]
    return summary, highlighted, pred_rows, ref_rows


def build_demo():
    with gr.Blocks(title="PARENT") as demo:
        gr.Markdown(
            "# PARENT\nPrecision And Recall of Entailed N-grams from the Table (Dhingra et al., 2019). "
            "A prediction n-gram counts as correct if the reference has it, or as far as the table entails it; "
            "recall combines the reference's table-supported n-grams and the table entries the prediction mentions."
        )
        with gr.Row():
            with gr.Column():
                table = gr.Textbox(label="Table (E2E MR, or WebNLG triples 'subject | predicate | object', one per line)", lines=4)
                references = gr.Textbox(label="Reference(s), one per line", lines=3)
                prediction = gr.Textbox(label="Prediction", lines=2)
                with gr.Row():
                    tokenizer = gr.Radio(["whitespace", "nltk"], value="nltk", label="Tokenizer")
                    auto_lambda = gr.Checkbox(value=True, label="λ from the reference (paper's heuristic)")
                    lambda_weight = gr.Slider(0.0, 1.0, value=0.5, step=0.05, label="λ (when not automatic)")
                button = gr.Button("Score", variant="primary")
            with gr.Column():
                summary = gr.Markdown()
                highlighted = gr.HighlightedText(label="Prediction words", color_map=COLORS, combine_adjacent=False)
        headers = ["n-gram", "order", "count", "table entailment w", "count in reference"]
        pred_table = gr.Dataframe(headers=headers, label="Prediction n-grams (precision)")
        ref_table = gr.Dataframe(
            headers=["n-gram", "order", "count", "table entailment w", "count in prediction"],
            label="Best reference's n-grams (recall, weighted by w)",
        )
        inputs = [table, references, prediction, tokenizer, auto_lambda, lambda_weight]
        outputs = [summary, highlighted, pred_table, ref_table]
        button.click(score, inputs=inputs, outputs=outputs)
        gr.Examples(EXAMPLES, inputs=inputs)
    return demo


demo = build_demo()

if __name__ == "__main__":
    demo.launch()
