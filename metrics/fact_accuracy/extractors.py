"""The fact extractors of fact_accuracy, one interface (:class:`facts.Extractor`),
chosen by the metric's config name:

=============  ============================================================
config         extractor
=============  ============================================================
``default``,   :class:`EndToEndExtractor`: the project's small generator
``end_to_end`` (SmolLM2-135M + LoRA) trained to write a text's facts as
               ``subject | relation | object`` triples (``text_to_triples``),
               the paper's end-to-end model (Sec. 4.2); checkpoint
               ``checkpoints/fact_accuracy/triples``
``relations``  ``relations.RelationExtractor``: a relation classifier over
               entity pairs, the paper's NER + relation classifier (Sec. 4.1);
               checkpoint ``checkpoints/fact_accuracy/relations``
``openie``     :class:`openie.OpenIEExtractor`: the model-free OpenIE
               baseline (Sec. 5.2) over a spaCy parse
=============  ============================================================

Ground-truth facts from a table need no extractor (:func:`table_facts`).
"""

from __future__ import annotations

import os
import re
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, Tuple

from d2t_metrics.normalize import lower_case
from d2t_metrics.normalize import restore_form
from d2t_metrics.normalize import settle_first_letter
from d2t_metrics.normalize import written_in_lower_case
from d2t_metrics.timing import stage

from .facts import Extractor
from .facts import Fact
from .grounding import blank_format_imitation
from .grounding import blank_repeats
from .grounding import clean_with_offsets
from .grounding import find_value
from .grounding import reading_units
from .grounding import words_of
from .matching import DEFAULT_FUZZY_THRESHOLD
from .matching import Matcher
from .matching import normalize_text
from .openie import OpenIEExtractor
from .openie import table_facts_of
from .text_to_triples import parse_triples
from .text_to_triples import prompt

METRIC_NAME = "fact_accuracy"
EXTRACTORS = ("end_to_end", "relations", "openie")
# config name -> extractor
CONFIGS: Dict[str, str] = {"default": "end_to_end", "end_to_end": "end_to_end", "relations": "relations", "openie": "openie"}
MODEL_FREE = ("openie",)
# extractor -> its checkpoint's folder inside checkpoints/fact_accuracy/
CHECKPOINT_SUBFOLDERS = {"end_to_end": "triples", "relations": "relations"}
TRAIN_COMMANDS = {
    "end_to_end": "python -m training.fact_accuracy.train triples --out checkpoints/fact_accuracy/triples",
    "relations": "python -m training.fact_accuracy.train relations --out checkpoints/fact_accuracy/relations",
}

# The end-to-end model reads at most this many words at once (its training
# texts, WebNLG lexicalizations, are shorter); longer texts are read in
# windows of whole sentences.
WINDOW_WORDS = 120
# The bound on one text's work: at most this many sentences (or WINDOW_WORDS-word pieces of
# a longer one) are read, in as many windows of at most MAX_NEW_TOKENS generated tokens each
# (16 x 192 = 3,072 tokens); the rest is left unread and the example flagged ``truncated``.
MAX_UNITS = 16
MAX_NEW_TOKENS = 192
# generated outputs an end-to-end extractor keeps (a prompt is a few hundred bytes)
CACHE_SIZE = 100_000


def extractor_name(config_name: Optional[str]) -> str:
    """The extractor a config selects; ``ValueError`` for an unknown config."""
    name = config_name or "default"
    if name not in CONFIGS:
        raise ValueError(f"unknown config {name!r}; choose one of {list(CONFIGS)}")
    return CONFIGS[name]


def table_facts(table) -> List[Fact]:
    """A table's facts (F_gt in data-to-text): triples as given; attribute-value
    records (E2E, WikiBio) as ``(name value, attribute, value)``
    (``Table.to_triples``)."""
    return table_facts_of(table)


# ---------------------------------------------------------------------------
# Checkpoints


def _has_weights(path: Optional[str]) -> bool:
    if not path or not os.path.isdir(path):
        return False
    from d2t_metrics.checkpoints import weight_files

    # a project checkpoint (adapters), or a complete transformers model
    return bool(weight_files(path)) or os.path.isfile(os.path.join(path, "model.safetensors"))


def default_model_path(extractor: str) -> Optional[str]:
    """The project's checkpoint of an extractor: ``<checkpoint_path("fact_accuracy")>/triples``
    (or ``/relations``), else ``./checkpoints/fact_accuracy/<sub>``; ``None`` if neither has weights."""
    sub = CHECKPOINT_SUBFOLDERS.get(extractor)
    if sub is None:
        return None
    try:
        from d2t_metrics.locations import checkpoint_path
    except ImportError:  # an older d2t_metrics without the locator
        checkpoint_path = None
    root = checkpoint_path(METRIC_NAME) if checkpoint_path else None
    for path in (os.path.join(root, sub) if root else None, os.path.join("checkpoints", METRIC_NAME, sub)):
        if _has_weights(path):
            return os.path.abspath(path)
    return None


def resolve_model_path(model: Optional[str], extractor: str) -> Optional[str]:
    """The checkpoint folder an extractor loads: ``model`` itself, or its
    ``triples``/``relations`` subfolder when ``model`` is the project's
    ``checkpoints/fact_accuracy`` folder holding both (what the command line
    passes); the default checkpoint without ``model``."""
    if model is None:
        return default_model_path(extractor)
    path = os.path.expanduser(str(model))
    sub = CHECKPOINT_SUBFOLDERS.get(extractor)
    if sub and os.path.isdir(path) and not _has_weights(path) and _has_weights(os.path.join(path, sub)):
        return os.path.join(path, sub)
    return path


def missing_model(extractor: str, given: Optional[str], config: str):
    from d2t_metrics.hub import missing_model_error

    sub = CHECKPOINT_SUBFOLDERS.get(extractor, extractor)
    where = given or os.path.join("checkpoints", METRIC_NAME, sub)
    return missing_model_error(
        where,
        FileNotFoundError(f"no {extractor} checkpoint (adapter_model.safetensors) at {where!r}; train one with "
                          f"{TRAIN_COMMANDS.get(extractor, '')}, or use the model-free config 'openie'"),
        metric=METRIC_NAME, config=config,
    )


def load_extractor(name: str, model: Optional[str] = None, device: Optional[str] = None, batch_size: int = 32,
                   spacy_model: Any = None, config: Optional[str] = None, restore_form: bool = True,
                   quantize: Optional[str] = None, dtype=None) -> Extractor:
    """Build extractor ``name`` (one of :data:`EXTRACTORS`); a learned one loads
    its checkpoint (:func:`resolve_model_path`) and raises
    ``ModelNotAvailableError`` when there is none. ``quantize="int8"`` (opt-in,
    end-to-end extractor on the CPU only) runs its generator in int8: faster, facts may change."""
    if name not in EXTRACTORS:
        raise ValueError(f"unknown extractor {name!r}; choose one of {list(EXTRACTORS)}")
    if quantize is not None and name != "end_to_end":
        raise ValueError(f"quantize={quantize!r} applies to the end_to_end extractor only, not {name!r}")
    if name == "openie":
        return OpenIEExtractor(spacy_model=spacy_model, batch_size=batch_size)
    path = resolve_model_path(model, name)
    if not path or not os.path.isdir(path):
        raise missing_model(name, model, config or name)
    if name == "end_to_end":
        return EndToEndExtractor(path, device=device, batch_size=batch_size, restore_form=restore_form, quantize=quantize,
                                 dtype=dtype)
    # spaCy is shared when the caller has one loaded (the relation extractor splits sentences with it)
    extra = {"spacy_model": spacy_model} if spacy_model is not None else {}
    return relation_extractor_class()(path, device=device, batch_size=batch_size, dtype=dtype, **extra)


def relation_extractor_class():
    """``relations.RelationExtractor``, imported when the ``relations`` config is used."""
    from .relations import RelationExtractor

    return RelationExtractor


# ---------------------------------------------------------------------------
# The end-to-end extractor

_SPACES = re.compile(r"\s+")


class ReadingPlan(NamedTuple):
    """How one text is read (:func:`plan_reading`): the cleaned text the facts are
    grounded in (``grounding.blank_format_imitation``), the offset in the given text of
    each of its characters, the sentence ranges read, the prompt texts (one per window),
    each window's range, the pieces left unread as imitating the output format, and
    whether sentences were left out (``truncated``)."""

    text: str
    offsets: List[int]
    units: List[Tuple[int, int]]
    windows: List[str]
    window_ranges: List[Tuple[int, int]]
    ignored: List[str]
    truncated: bool


def plan_reading(text: str, values: Sequence[str] = (), relations: Sequence[str] = (), restore: bool = False,
                 max_words: int = WINDOW_WORDS, max_units: int = MAX_UNITS) -> ReadingPlan:
    """The windows the extractor reads ``text`` in. Invisible characters are dropped and text
    imitating the output format blanked (``grounding``); the rest is split into sentences
    (at most ``max_units``, each at most ``max_words`` words), a run of words said twice in a
    row read once (``grounding.blank_repeats``). Window 0 is the first sentence;
    window k is sentences k-1 and k: the previous sentence resolves "He" and "It", and a
    sentence's facts are read without anything that follows it, so an appended instruction
    cannot make the extractor drop what the text said before. With ``restore`` (a table's
    ``values`` given), a text written in lower case (``normalize.written_in_lower_case``: a
    copied "İzmir" allowed) is read in lower case with the values' casing given back
    (``normalize.restore_form``). The first letter's case is read as the rest of the text
    sets it (``normalize.settle_first_letter``), and whitespace runs as one space."""
    clean, offsets = clean_with_offsets(text)
    # repeats first: a doubled run-on text is one run of words said twice, which the shared
    # sentence-level rule (untrusted.blank_non_claims) leaves a piece of
    blanked, spans = blank_format_imitation(blank_repeats(clean)[0], relations, values)
    units, truncated = reading_units(blanked, max_words, max_units)
    # what the model reads: the first letter's case follows the rest of the text (a swapped
    # first letter must not turn restore_form off, nor change the words read); the evidence
    # spans stay as written (plan.text)
    settled = settle_first_letter(blanked)
    restore = restore and written_in_lower_case(settled)
    pieces = [_SPACES.sub(" ", settled[lo:hi]).strip() for lo, hi in units]
    if restore:
        # all in lower case first: the text and its lower-cased form read the same
        # (normalize.lower_case: "İzmir" as "izmir", without Python's combining dot)
        pieces = [restore_form(lower_case(p), values, lower=lower_case) for p in pieces]
    windows_, ranges = [], []
    for k, (lo, hi) in enumerate(units):
        windows_.append(pieces[k] if k == 0 else pieces[k - 1] + " " + pieces[k])
        ranges.append((units[k - 1][0] if k else lo, hi))
    ignored = [_SPACES.sub(" ", clean[a:b]).strip() for a, b in spans]
    return ReadingPlan(blanked, offsets, units, windows_, ranges, [i for i in ignored if i], truncated)


def evidence_unit(fact: Fact, plan: ReadingPlan, window: int, obj: Tuple[int, int], matcher: Matcher) -> Tuple[int, int]:
    """The sentence of ``window`` that states ``fact``: one that names both its subject and its
    object without fuzzy matching; else the last one that names its object (a window reads its
    last sentence, the one before only resolving "He" or "It"); else the sentence where the
    window's first mention of the object begins. (The object's first mention alone would credit
    "Aleksandre Guruli plays for FC Dinamo Batumi." to the sentence before it that names the club;
    a fuzzy match would credit "Lockheed AC-130" to a sentence about the "Lockheed C-130".)"""
    lo, hi = plan.window_ranges[window]
    units = [u for u in plan.units if lo <= u[0] and u[1] <= hi]

    def names(value: str, unit: Tuple[int, int], by: Matcher) -> bool:
        return find_value(value, plan.text, words_of(plan.text, unit[0], unit[1]), by) is not None

    exact = Matcher(None)
    both = [u for u in units if names(fact.object, u, exact) and names(fact.subject, u, exact)]
    with_object = [u for u in units if names(fact.object, u, matcher)]
    if both or with_object:
        return (both or with_object[::-1])[0]
    return next(u for u in plan.units if u[0] <= obj[0] < u[1] or obj[0] < u[0]) if plan.units else obj


def ground_fact(fact: Fact, plan: ReadingPlan, window: int, matcher: Matcher) -> Tuple[Optional[Fact], str]:
    """``fact`` (read from ``plan``'s window ``window``) with its evidence: the sentence that
    states it (:func:`evidence_unit`), as written in the given text, with its offsets there; or
    ``(None, what)`` when its subject or object is not written in the window (``what`` says which)."""
    lo, hi = plan.window_ranges[window]
    words = words_of(plan.text, lo, hi)
    subject = find_value(fact.subject, plan.text, words, matcher)
    obj = find_value(fact.object, plan.text, words, matcher)
    if subject is None or obj is None:
        return None, " and ".join(n for n, span in (("subject", subject), ("object", obj)) if span is None)
    unit = evidence_unit(fact, plan, window, obj, matcher)
    start, end = plan.offsets[unit[0]], plan.offsets[unit[1] - 1] + 1
    return fact._replace(evidence=_SPACES.sub(" ", plan.text[unit[0]:unit[1]]).strip(), start=start, end=end), ""


class EndToEndExtractor(Extractor):
    """Facts written out by the shared small generator (``d2t_metrics.generator``)
    fine-tuned with ``text_to_triples``' prompt: greedy decoding, a text read in
    windows of one or two sentences (:func:`plan_reading`), at most
    :data:`MAX_UNITS` sentences of at most :data:`WINDOW_WORDS` words each, at most
    :data:`MAX_NEW_TOKENS` generated tokens per window; the facts of a text's
    windows are pooled. A fact is kept only when its subject and its object are
    written in the window it was read from (``grounding.find_value``), with the
    sentence that states it as its evidence; the others are reported per text as
    ``ungrounded`` (:attr:`reports`, with ``truncated`` and the ``ignored`` pieces
    that imitated the output format). A model trained on prompts that list relations (its recipe's
    ``listed_relations``) is given the table's relations, where there is a
    table; otherwise it reads the text alone. With a table, a text written as
    WebNLG 2017's system outputs are (lower-cased, punctuation split off) is
    first given back the table values' casing and ordinary punctuation
    (``normalize.restore_form``; ``restore_form=False`` reads it as
    written)."""

    name = "end_to_end"

    def __init__(self, path: str, device: Optional[str] = None, batch_size: int = 32, max_new_tokens: int = MAX_NEW_TOKENS,
                 window_words: int = WINDOW_WORDS, restore_form: bool = True, max_units: int = MAX_UNITS,
                 quantize: Optional[str] = None, dtype=None):
        from d2t_metrics.generator import load_generator

        self.path = path
        # quantize="int8": opt-in, CPU only, facts may change (d2t_metrics.generator.QUANTIZATIONS)
        self.tokenizer, self.model, self.recipe = load_generator(path, device=device, dtype=dtype, quantize=quantize)
        if self.recipe.get("task", "causal-lm") != "causal-lm":
            raise ValueError(f"{path} is a {self.recipe.get('task')!r} checkpoint, not a text-to-triples generator")
        self.batch_size = batch_size
        self.max_new_tokens = max_new_tokens
        self.window_words = window_words
        self.max_units = max_units
        self.lists_relations = bool(self.recipe.get("listed_relations"))
        self.restore_form = bool(restore_form)
        self.matcher = Matcher(DEFAULT_FUZZY_THRESHOLD)  # the metric sets its own
        # per text of the last extract() call: {"truncated", "ungrounded", "ignored"}
        self.reports: List[Dict[str, Any]] = []
        # Generation is the cost: a text read once is not read again by this
        # object (references repeat across the systems scored on one input).
        self._cache: Dict[str, str] = {}

    def generate(self, prompts: List[str], show_progress: bool = True) -> List[str]:
        from d2t_metrics.generator import generate

        todo = list(dict.fromkeys(p for p in prompts if p not in self._cache))
        if todo:
            outputs = generate(self.model, self.tokenizer, todo, max_new_tokens=self.max_new_tokens,
                               batch_size=max(1, int(self.batch_size)), show_progress=show_progress, desc="extracting facts")
            if len(self._cache) + len(todo) > CACHE_SIZE:
                self._cache.clear()
            self._cache.update(zip(todo, outputs))
        return [self._cache[p] for p in prompts]

    def extract(self, texts: Sequence[str], tables: Optional[Sequence] = None, show_progress: bool = True) -> List[List[Fact]]:
        owners, prompts, plans = [], [], []
        with stage("sentence split"):
            for i, text in enumerate(texts):
                table = tables[i] if tables is not None else None
                facts_of_table = table_facts(table) if table is not None else []
                predicates = [f.relation for f in facts_of_table]
                relations = predicates if table is not None and self.lists_relations else None
                plan = plan_reading(text or "", [v for f in facts_of_table for v in (f.subject, f.object)], predicates,
                                    restore=self.restore_form and table is not None,
                                    max_words=self.window_words, max_units=self.max_units)
                plans.append(plan)
                for w, window in enumerate(plan.windows):
                    owners.append((i, w))
                    prompts.append(prompt(window, relations))
        with stage("extraction"):
            outputs = self.generate(prompts, show_progress) if prompts else []
        facts: List[List[Fact]] = [[] for _ in texts]
        self.reports = [{"truncated": p.truncated, "ungrounded": [], "ignored": p.ignored} for p in plans]
        with stage("matching"):
            seen: List[set] = [set() for _ in texts]
            for (i, w), generated in zip(owners, outputs):
                for s, r, o in parse_triples(generated):
                    if (s, r, o) in seen[i]:
                        continue
                    seen[i].add((s, r, o))
                    grounded, missing = ground_fact(Fact(s, r, o), plans[i], w, self.matcher)
                    if grounded is None:
                        self.reports[i]["ungrounded"].append({"subject": s, "relation": r, "object": o, "not_in_text": missing})
                    else:
                        facts[i].append(grounded)
        return facts
