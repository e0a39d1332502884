"""Extract one verbalization template per predicate from WebNLG training data.

As Dušek & Kasner (2020) did for their *Default* setup, templates come from
the single-triple entries of the WebNLG training set. The enriched WebNLG
corpus (v1.5+) gives each lexicalization a delexicalized ``<template>`` in which
the subject is ``AGENT-1`` and the object ``PATIENT-1``; where an entry lacks
one, the subject and object strings are delexicalized in the text itself.

A template is *clean* when, after detokenization, it has exactly one subject
and one object placeholder, no other entity tag (``BRIDGE-1``, ``AGENT-2`` …),
is a single sentence ending with a period, and has 3 to 30 words. For each
predicate the most frequent clean template is kept; ties go to the template
sharing more words with the predicate name, then to the shorter one, then to
the alphabetically first (so the output is deterministic).

Usage (the two shipped WebNLG sets)::

    python -m d2t_metrics.extract_templates \\
        --webnlg /work/shared/data/webnlg2017/xml/train --out d2t_metrics/templates/webnlg.json
    python -m d2t_metrics.extract_templates \\
        --webnlg webnlg-dataset/release_v3.0/en/train --webnlg webnlg-dataset/release_v3.0/en/dev \\
        --exclude-inputs /work/shared/data/webnlg2017/xml/test --missing-from webnlg \\
        --out d2t_metrics/templates/webnlg_v3.json

The second set covers the predicates that WebNLG 2017's training data has no template for,
from the WebNLG 3.0 (2020) training and development data, without any entry whose triple set
is a WebNLG 2017 test input (``--exclude-inputs``; the metrics are measured on those inputs).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections import Counter, defaultdict
from typing import Dict, Iterable, List, Optional, Tuple

from .datasets import WebNLGEntry, load_webnlg_xml
from .normalize import normalize_entity, normalize_predicate
from .verbalize import load_templates

SUBJECT, OBJECT = "<subject>", "<object>"
_TAG = re.compile(r"\b(?:AGENT|PATIENT|BRIDGE)-\d+\b")
MIN_WORDS, MAX_WORDS = 3, 30

# Detokenization of the corpus' PTB-style templates ("AGENT-1 's city , PATIENT-1 .").
_DETOK = [
    (re.compile(r"``\s*|\s*''"), '"'),
    (re.compile(r"\s+([.,;:!?%)\]])"), r"\1"),
    (re.compile(r"([(\[$])\s+"), r"\1"),
    (re.compile(r"\s+('s|'|n't)\b"), r"\1"),
    (re.compile(r"\s+'(\s|$)"), r"'\1"),
    (re.compile(r"\s+"), " "),
]


def detokenize(text: str) -> str:
    """``AGENT-1 's capital is `` PATIENT-1 '' .`` → ``AGENT-1's capital is "PATIENT-1".``"""
    for pattern, repl in _DETOK:
        text = pattern.sub(repl, text)
    return text.strip()


def to_placeholders(template: str) -> str:
    """Corpus tags to the verbalizer's placeholders, dropping quotes around them.

    Values are verbalized without their quotes (see :func:`normalize_entity`),
    so ``"PATIENT-1"`` becomes plain ``<object>``.
    """
    text = template.replace("AGENT-1", SUBJECT).replace("PATIENT-1", OBJECT)
    for ph in (SUBJECT, OBJECT):
        text = text.replace(f'"{ph}"', ph)
    return text


def delexicalize_text(text: str, subject: str, obj: str) -> Optional[str]:
    """Replace the normalized subject and object strings in a lexicalization by tags.

    Returns ``None`` unless each occurs exactly once (case-insensitively) and they do not overlap.
    """
    subj_n, obj_n = normalize_entity(subject), normalize_entity(obj)
    if not subj_n or not obj_n or subj_n.lower() in obj_n.lower() or obj_n.lower() in subj_n.lower():
        return None
    out = text
    for value, tag in ((subj_n, "AGENT-1"), (obj_n, "PATIENT-1")):
        hits = [m for m in re.finditer(re.escape(value), out, flags=re.IGNORECASE)]
        if len(hits) != 1:
            return None
        m = hits[0]
        out = out[: m.start()] + tag + out[m.end():]
    return out


# Words the corpus' entity mentions carry around the entity itself: a mention
# "a test pilot" or "Aarhus Airport 's" is replaced by its tag whole, so the
# template "AGENT-1 was PATIENT-1 ." lost the article ("Alan Bean was Test
# pilot."). Only the indefinite article (the verbalizer makes a/an agree) and
# the possessive are put back: "the" belongs to some names and not others
# ("the United States", "Aarhus Airport"), and a template serves them all.
_DETERMINERS = ("a", "an")
_POSSESSIVES = ("'s",)


def restore_mention_words(raw: str, tag: str, mention: str, entity: str) -> str:
    """Put back the determiner before, and the possessive after, ``tag`` that its mention had.

    >>> restore_mention_words("AGENT-1 was PATIENT-1 .", "PATIENT-1", "a test pilot", "Test_pilot")
    'AGENT-1 was a PATIENT-1 .'
    >>> restore_mention_words("AGENT-1 runway is PATIENT-1 .", "AGENT-1", "Aarhus Airport 's", "Aarhus_Airport")
    "AGENT-1 's runway is PATIENT-1 ."
    """
    name = normalize_entity(entity).lower()
    at = mention.lower().find(name) if name else -1
    if at < 0 or raw.count(tag) != 1:
        return raw
    before, after = mention[:at].strip(), mention[at + len(name):].strip()
    if before.lower() in _DETERMINERS:
        raw = raw.replace(tag, f"{before.lower()} {tag}")
    if after in _POSSESSIVES:
        raw = raw.replace(tag, f"{tag} {after}")
    return raw


def clean_template(raw: str) -> Optional[str]:
    """A detokenized template with placeholders, or ``None`` if it is not clean."""
    tags = _TAG.findall(raw)
    if sorted(tags) != ["AGENT-1", "PATIENT-1"]:
        return None
    text = to_placeholders(detokenize(raw))
    if text.count(SUBJECT) != 1 or text.count(OBJECT) != 1:
        return None
    if not text.endswith(".") or text.endswith("..") or re.search(r"[,;:]\s*\.$", text):
        return None
    # One sentence: no sentence-final punctuation before the end.
    if re.search(r"[.!?]\s+[A-Z<]", text[:-1]):
        return None
    if re.search(r"<(?!subject>|object>)", text.replace("<subject>", "").replace("<object>", "")):
        return None
    n_words = len(text.split())
    if not MIN_WORDS <= n_words <= MAX_WORDS:
        return None
    return text[:1].upper() + text[1:] if not text.startswith("<") else text


def candidate_templates(entry: WebNLGEntry) -> Iterable[str]:
    """Clean templates of one single-triple entry, one per usable lexicalization."""
    triple = entry.table[0]
    for i, text in enumerate(entry.lexicalizations):
        raw = entry.templates[i] if i < len(entry.templates) else None
        refs = entry.references[i] if i < len(entry.references) else {}
        mentions = entry.mentions[i] if i < len(entry.mentions) else {}
        if raw:
            for tag, mention in mentions.items():
                if tag in ("AGENT-1", "PATIENT-1") and refs.get(tag):
                    raw = restore_mention_words(raw, tag, mention, refs[tag])
            # A lexicalization whose tags point the other way round (the
            # object as AGENT-1) would flip the fact; swap the tags back.
            if refs.get("AGENT-1") == triple.object and refs.get("PATIENT-1") == triple.subject and triple.subject != triple.object:
                raw = raw.replace("AGENT-1", "\0").replace("PATIENT-1", "AGENT-1").replace("\0", "PATIENT-1")
        else:
            raw = delexicalize_text(text, triple.subject, triple.object)
            if raw is None:
                continue
        cleaned = clean_template(raw)
        if cleaned is not None:
            yield cleaned


def _predicate_overlap(template: str, predicate: str) -> int:
    words = set(normalize_predicate(predicate).lower().split())
    return len(words & set(re.findall(r"[a-z]+", template.lower())))


def choose(counter: Counter, predicate: str) -> Tuple[str, int]:
    """The most frequent template; ties by predicate overlap, then length, then text."""
    best = min(counter.items(), key=lambda kv: (-kv[1], -_predicate_overlap(kv[0], predicate), len(kv[0]), kv[0]))
    return best


def extract(entries: Iterable[WebNLGEntry]) -> Tuple[Dict[str, str], Dict[str, int], Dict[str, int]]:
    """``(templates, counts, n_candidates)`` per predicate from single-triple entries."""
    per_predicate: Dict[str, Counter] = defaultdict(Counter)
    for entry in entries:
        if len(entry.table) != 1:
            continue
        predicate = entry.table[0].predicate
        per_predicate[predicate].update(candidate_templates(entry))
    templates, counts, totals = {}, {}, {}
    for predicate in sorted(per_predicate):
        counter = per_predicate[predicate]
        if not counter:
            continue
        template, count = choose(counter, predicate)
        templates[predicate] = template
        counts[predicate] = count
        totals[predicate] = sum(counter.values())
    return templates, counts, totals


_OVERLAP_NOISE = re.compile(r"[_\"']")


def input_key(entry: WebNLGEntry) -> frozenset:
    """An entry's triple set, compared as the shared data's README matches inputs: without
    underscores and quotes, whitespace collapsed, case ignored (v1.6 and v3.0 spell some
    names differently, e.g. with or without apostrophes)."""
    def norm(text: str) -> str:
        return " ".join(_OVERLAP_NOISE.sub(" ", str(text)).split()).lower()
    return frozenset((norm(t.subject), norm(t.predicate), norm(t.object)) for t in entry.table)


def without_inputs(entries: List[WebNLGEntry], excluded: Iterable[WebNLGEntry]) -> List[WebNLGEntry]:
    """``entries`` without those whose triple set is one of ``excluded``'s inputs."""
    keys = {input_key(e) for e in excluded}
    return [e for e in entries if input_key(e) not in keys]


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--webnlg", required=True, action="append",
                        help="WebNLG XML file or directory (a training split); repeat to read several")
    parser.add_argument("--exclude-inputs", action="append", default=[],
                        help="WebNLG XML whose inputs (triple sets) no training entry may be (repeatable)")
    parser.add_argument("--missing-from", default=None,
                        help="keep only predicates that this template set (name or JSON path) has no template for")
    parser.add_argument("--out", required=True, help="output JSON path")
    args = parser.parse_args(argv)

    entries = [e for path in args.webnlg for e in load_webnlg_xml(path)]
    n_read = len(entries)
    if args.exclude_inputs:
        entries = without_inputs(entries, [e for path in args.exclude_inputs for e in load_webnlg_xml(path)])
    templates, counts, totals = extract(entries)
    if args.missing_from:
        known = load_templates(args.missing_from)
        templates = {p: t for p, t in templates.items() if p not in known}
    n_single = sum(1 for e in entries if len(e.table) == 1)
    data = {
        "description": (
            "One template per WebNLG predicate: the most frequent clean delexicalized lexicalization "
            "of the single-triple training entries (Dušek & Kasner, 2020). Built by "
            "python -m d2t_metrics.extract_templates."
        ),
        "source": [os.path.relpath(p, os.path.dirname(os.path.dirname(os.path.dirname(os.path.normpath(p))))) for p in args.webnlg]
        if len(args.webnlg) > 1 else os.path.basename(os.path.normpath(args.webnlg[0])),
        "excluded_inputs_of": [os.path.basename(os.path.normpath(p)) for p in args.exclude_inputs],
        "entries_excluded": n_read - len(entries),
        "only_predicates_missing_from": args.missing_from,
        "single_triple_entries": n_single,
        "counts": {p: [counts[p], totals[p]] for p in templates},
        "templates": templates,
    }
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(data, f, ensure_ascii=False, indent=1, sort_keys=False)
        f.write("\n")
    predicates = {e.table[0].predicate for e in entries if len(e.table) == 1}
    print(
        f"{len(templates)} templates for {len(predicates)} predicates from {n_single} single-triple entries "
        f"({n_read - len(entries)} entries excluded as test inputs) -> {args.out}",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
