"""Gradio demo of PARENT: enter a table, reference(s) and a prediction; see P/R/F and the n-grams behind them.

Run ``python metrics/parent/app.py`` (with d2t-metrics installed: ``pip install -e ".[parent,spaces]"``);
it also runs as the folder's Hub Space. Importing this file launches nothing;
``build_demo()`` (or the module attribute ``demo``) builds the ``gr.Blocks``.
"""

import html
import os

from d2t_metrics.spaces import example_values, read_table, shown_error, table_input

HERE = os.path.dirname(os.path.abspath(__file__))

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
    [
        [["name", "Tomas Lindqvist"], ["birth_date", "4 March 1902"], ["nationality", "Swedish"], ["occupation", "cartographer"]],
        "Tomas Lindqvist (4 March 1902) was a Swedish cartographer.",
        "Tomas Lindqvist (born 4 March 1902) was a Swedish cartographer and painter.",
        "nltk",
        True,
        0.5,
    ],
]

COLORS = {"in reference": "#7fc97f", "entailed by table": "#beaed4", "neither": "#fdc086"}

_metric = None


def get_metric():
    """The PARENT module of this folder, loaded once per process."""
    global _metric
    if _metric is None:
        import evaluate

        _metric = evaluate.load(HERE)
    return _metric


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


def highlight(example, prediction, tokenizer="nltk"):
    """``[(token + " ", label)]``: each prediction token as the reference or the table supports it."""
    from d2t_metrics.tokenize import get_tokenizer

    labels = _unigram_labels(example["prediction_ngrams"])
    return [(tok + " ", labels.get(tok, "neither")) for tok in get_tokenizer(tokenizer)(prediction)]


def summary_markdown(ex):
    return (
        f"**PARENT F = {ex['f1']:.4f}** (precision {ex['precision']:.4f}, recall {ex['recall']:.4f})\n\n"
        f"Recall = reference recall {ex['reference_recall']:.4f}^(1−λ) × table recall {ex['table_recall']:.4f}^λ "
        f"with λ = {ex['lambda']:.3f}. Best reference: #{ex['reference_index'] + 1}."
    )


def compute(table, references, prediction, tokenizer="nltk", lambda_weight=None):
    """PARENT of one prediction with its n-grams: the per-example dict (``return_ngrams=True``).

    ``references``: a string (one reference per line) or a list. A bad table or
    input raises ``ValueError``."""
    refs = references if isinstance(references, (list, tuple)) else str(references or "").splitlines()
    refs = [r.strip() for r in refs if r and r.strip()]
    if not refs:
        raise ValueError("PARENT needs at least one reference")
    result = get_metric().compute(
        predictions=[prediction], references=[refs], tables=[table], tokenizer=tokenizer,
        lambda_weight=lambda_weight, return_ngrams=True, show_progress=False,
    )
    return result["examples"][0]


def score(table, references, prediction, tokenizer, auto_lambda, lambda_weight):
    """``(summary markdown, highlighted tokens, prediction n-gram rows, reference n-gram rows)``
    for a table in any form ``parse_table`` reads; bad input raises ``ValueError``."""
    ex = compute(table, references, prediction, tokenizer, None if auto_lambda else float(lambda_weight))
    pred_rows = [
        [r["ngram"], r["order"], r["count"], round(r["table_entailment"], 3), r["reference_count"]]
        for r in ex["prediction_ngrams"]
    ]
    ref_rows = [
        [r["ngram"], r["order"], r["count"], round(r["table_entailment"], 3), r["prediction_count"]]
        for r in ex["reference_ngrams"]
    ]
    return summary_markdown(ex), highlight(ex, prediction, tokenizer), pred_rows, ref_rows


def explain(example, prediction, metric=None, tokenizer="nltk"):
    """HTML explanation of one example (from ``return_ngrams=True``): the prediction's
    words coloured by what supports them, then its n-grams with their table entailment."""
    words = "".join(
        f'<span style="background:{COLORS[label]};padding:1px 3px;border-radius:3px;margin:1px" title="{label}">'
        f"{html.escape(tok.strip())}</span> "
        for tok, label in highlight(example, prediction, tokenizer)
    )
    legend = " ".join(f'<span style="background:{c};padding:1px 4px;border-radius:3px">{k}</span>' for k, c in COLORS.items())
    entailed = [r for r in example["prediction_ngrams"] if r["table_entailment"] > 0]
    rows = "".join(
        f"<tr><td>{html.escape(r['ngram'])}</td><td>{r['order']}</td><td>{r['table_entailment']:.2f}</td>"
        f"<td>{'yes' if r['reference_count'] else 'no'}</td></tr>"
        for r in sorted(entailed, key=lambda r: (-r["table_entailment"], r["order"]))
    )
    return (
        f"<p>precision {example['precision']:.4f} · recall {example['recall']:.4f} "
        f"(table recall {example['table_recall']:.4f}, λ = {example['lambda']:.3f})</p>"
        f"<p>{words}</p><p><small>{legend}</small></p>"
        f"<details><summary>Prediction n-grams entailed by the table ({len(entailed)})</summary>"
        '<div class="d2t-scroll" style="overflow-x:auto;max-width:100%"><table style="margin:0">'
        "<tr><th>n-gram</th><th>n</th><th>table entailment w</th><th>in reference</th></tr>"
        f"{rows}</table></div></details>"
    )


def score_ui(source, layout, grid, text, references, prediction, tokenizer, auto_lambda, lambda_weight):
    try:
        table = read_table(source, layout, grid, text)
        if not prediction.strip():
            raise ValueError("enter a prediction")
        summary, highlighted, pred_rows, ref_rows = score(table, references, prediction, tokenizer, auto_lambda, lambda_weight)
    except ValueError as error:
        return shown_error(error), "", [], [], []
    return "", summary, highlighted, pred_rows, ref_rows


def build_demo():
    import gradio as gr  # lazy: gradio, only to build the demo

    with gr.Blocks(title="PARENT") as demo:
        gr.Markdown(
            "# PARENT\nPrecision And Recall of Entailed N-grams from the Table (Dhingra et al., 2019). "
            "A prediction n-gram counts as correct if the reference has it, or as far as the table entails it; "
            "recall combines the reference's table-supported n-grams and the table entries the prediction mentions."
        )
        with gr.Row():
            with gr.Column():
                table = table_input(EXAMPLES[0][0])
                references = gr.Textbox(label="Reference(s), one per line", lines=3, value=EXAMPLES[0][1])
                prediction = gr.Textbox(label="Prediction", lines=2, value=EXAMPLES[0][2])
                with gr.Row():
                    tokenizer = gr.Radio(["whitespace", "nltk"], value="nltk", label="Tokenizer")
                    auto_lambda = gr.Checkbox(value=True, label="λ from the reference (paper's heuristic)")
                    lambda_weight = gr.Slider(0.0, 1.0, value=0.5, step=0.05, label="λ (when not automatic)")
                button = gr.Button("Score", variant="primary")
            with gr.Column():
                error = gr.HTML()
                summary = gr.Markdown()
                highlighted = gr.HighlightedText(label="Prediction words", color_map=COLORS, combine_adjacent=False)
        headers = ["n-gram", "order", "count", "table entailment w", "count in reference"]
        pred_table = gr.Dataframe(headers=headers, label="Prediction n-grams (precision)")
        ref_table = gr.Dataframe(
            headers=["n-gram", "order", "count", "table entailment w", "count in prediction"],
            label="Best reference's n-grams (recall, weighted by w)",
        )
        options = [references, prediction, tokenizer, auto_lambda, lambda_weight]
        button.click(score_ui, inputs=table.inputs + options, outputs=[error, summary, highlighted, pred_table, ref_table])
        gr.Examples(
            [example_values(e[0]) + list(e[1:]) for e in EXAMPLES],
            inputs=table.example_inputs + options,
            example_labels=["E2E MR", "WebNLG triples", "WikiBio attribute-value pairs"],
        )
    return demo


def __getattr__(name):
    # ``app.demo`` builds the demo on first use (gradio's reload mode and the
    # tests look for it); importing the module alone builds nothing.
    if name == "demo":
        global demo
        demo = build_demo()
        return demo
    raise AttributeError(name)


if __name__ == "__main__":
    build_demo().launch()
