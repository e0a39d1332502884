"""How DAE's arc probabilities make an example's score, label and per-fact verdicts.

The text's arcs are pooled by ``pooling``; with ``direction="both"`` the source's own arcs
(a table's fact sentences', scored against the text) make a second score, and the example
keeps the lower of the two (:data:`BOTH`); both choices are RESULTS.md's ``dae_pooling``.
"""

import bisect

from .scorer import MAX_PARSE_CHARS
from .scorer import cap_text

POOLINGS = ("mean", "min", "mean_min")
DIRECTIONS = ("text", "both")
# With direction="both", how the source's arcs (checked against the text) pool, and how that
# score joins the text's: both chosen leaving one WebNLG 2017 category out (RESULTS.md `dae_pooling`).
SOURCE_POOLING = "mean_min"
BOTH = "min"


def source_check(example, reverse, facts, source, nlp, threshold):
    """The keys direction="both" adds to an example (``example`` holds the text's own check,
    ``reverse`` the source's arcs scored against the text): the two scores and the joined one,
    and for a table one verdict per fact, its arcs found by their words' character offsets in
    the joined fact sentences (spaCy's tokenizer is the parser's first step, so token i is the
    same word in both).

    The label reads pooled scores, as the score does, not single arcs: the text hallucinates
    when its score is below ``threshold``, a fact is left out when its own arcs, pooled as
    :data:`SOURCE_POOLING`, are. One arc below 0.5 is often a faithful paraphrase of a template
    word; one arc per fact flagged 564 E2E facts where the slot-error script finds 335 (precision
    0.44), the pooled rule 350 (precision 0.63; ``benchmarks/history/dae.md``, session 35)."""
    text_score = example["score"]
    # a source without arcs states nothing the text could leave out: that direction has no score
    source_score = None if reverse["no_arcs"] else pooled(reverse["score"], reverse["min_score"], SOURCE_POOLING)
    # a text without arcs says nothing verifiable and keeps its 0.0 (scorer module docstring)
    if example["no_arcs"]:
        score = 0.0
    else:
        score = text_score if source_score is None else joined(text_score, source_score, BOTH)
    hallucination = text_score < threshold
    out = {"score": score, "text_score": text_score, "source_score": source_score,
           "truncated": example["truncated"] or reverse["truncated"]}
    if facts is None:
        omission = example["no_arcs"] or (source_score is not None and source_score < threshold)
        out["source_arcs"] = reverse["arcs"]
    else:
        out["facts"] = fact_verdicts(reverse["arcs"], facts, source, nlp, threshold)
        out["omitted_facts"] = [{k: f[k] for k in ("fact", "sentence", "score")} for f in out["facts"] if f["covered"] is False]
        omission = example["no_arcs"] or bool(out["omitted_facts"])
    out["ok"] = not (omission or hallucination)  # a text without arcs counts as an omission
    out["label"] = label_of(omission, hallucination)
    return out


def fact_verdicts(arcs, facts, source, nlp, threshold):
    """Per fact of a table: its sentence's arcs (an arc belongs to the fact of its child word),
    their score (pooled as :data:`SOURCE_POOLING`) and whether the text covers it (None when its
    sentence has no arc)."""
    starts, offset = [], 0
    for _, sentence in facts:
        starts.append(offset)
        offset += len(sentence) + 1
    # only the part the scorer parsed has arcs (a 500-fact table is capped like any hypothesis)
    parsed, _ = cap_text(source, MAX_PARSE_CHARS)
    token_fact = [bisect.bisect_right(starts, token.idx) - 1 for token in nlp.tokenizer(parsed)]
    out = [{"fact": fact, "sentence": sentence, "score": None, "covered": None, "arcs": []} for fact, sentence in facts]
    for arc in arcs:
        entry = out[token_fact[arc["child_index"]]]
        entry["arcs"].append(arc)
    for entry in out:
        probabilities = [a["probability"] for a in entry["arcs"]]
        if probabilities:
            entry["score"] = pooled(sum(probabilities) / len(probabilities), min(probabilities), SOURCE_POOLING)
            entry["covered"] = entry["score"] >= threshold
    return out


def label_of(omission, hallucination):
    """OK / omission / hallucination / omission+hallucination, as nli_semantic_accuracy labels."""
    if omission and hallucination:
        return "omission+hallucination"
    return "omission" if omission else "hallucination" if hallucination else "OK"


def joined(text_score, source_score, how):
    """An example's score from its text's and its source's pooled arc probabilities."""
    if how == "text":
        return text_score
    if how == "source":
        return source_score
    if how == "mean":
        return (text_score + source_score) / 2
    if how == "product":
        return text_score * source_score
    return min(text_score, source_score)


def pooled(mean, low, pooling):
    """An example's score from its mean and lowest arc probability (both 0.0 without arcs)."""
    if pooling == "mean":
        return mean
    if pooling == "min":
        return low
    return (mean + low) / 2
