"""A learned verbalizer for facts whose predicate has no template (issue #34).

Templates exist only for predicates seen in training data; any other fact
falls back to "The <predicate> of <subject> is <object>.", which reads badly
for many predicates ("The owning organisation of X is Y.") and makes an NLI
model doubt a text that states the fact well. The project's small generator
(:mod:`d2t_metrics.generator`, SmolLM2-135M-Instruct with LoRA), trained on
WebNLG's single-triple lexicalisations (``python -m training.nli_semantic_accuracy.train_verbalizer``,
checkpoint ``checkpoints/nli_semantic_accuracy/verbalizer``), writes such a fact as one sentence.

A generated sentence is used only when it says the fact and nothing else
that can be checked (:func:`states_only`): the subject and the object appear
in it verbatim, and every capitalized word or number it adds comes from the
predicate's name. Otherwise the back-off sentence is used, so a value the
model would drop, alter or follow as an instruction never reaches a metric
in altered form. Each fact's sentence says where it came from
(:meth:`LearnedVerbalizer.source_of`: ``template``, ``learned`` or ``backoff``).

Training (``training/nli_semantic_accuracy/train_verbalizer.py``) and use build prompts and targets here.
"""

from __future__ import annotations

import re
from typing import Dict, Iterable, List, Mapping, Optional, Tuple

from .normalize import normalize_entity, normalize_predicate
from .tables import Triple
from .verbalize import BACKOFF_TEMPLATE, TemplateSpec, Verbalizer

PROMPT = "Write the fact as one sentence.\nFact: {subject} | {predicate} | {object}\nSentence:"
# Longer facts are verbalized by the back-off without asking the model: its
# work stays bounded and it was trained on WebNLG values (at most ~150 characters).
MAX_FACT_CHARS = 300
MAX_NEW_TOKENS = 64
# At most this many facts of one table go to the model (a 500-triple table of new
# predicates would otherwise cost minutes on a CPU); the others keep the back-off.
MAX_LEARNED_PER_TABLE = 64
# Words a sentence may add around the subject and object ("was born in", "is the
# capital of"): WebNLG's single-triple lexicalisations that pass states_only add at most
# about 15; more is a sign of a second fact.
MAX_ADDED_WORDS = 16
SOURCES = ("template", "learned", "backoff")

_WORD = re.compile(r"[^\W_]+(?:['’.-][^\W_]+)*", re.UNICODE)
_SPACES = re.compile(r"\s+")


def fact_fields(triple: Triple) -> Tuple[str, str, str]:
    """The words a sentence of ``triple`` must carry: normalized subject, predicate and object."""
    return normalize_entity(triple.subject), normalize_predicate(triple.predicate), normalize_entity(triple.object)


def prompt(subject: str, predicate: str, obj: str) -> str:
    """The generator's prompt for one fact (fields as :func:`fact_fields` gives them)."""
    one_line = [_SPACES.sub(" ", v).strip() for v in (subject, predicate, obj)]
    return PROMPT.format(subject=one_line[0], predicate=one_line[1], object=one_line[2])


def _remove_once(text: str, value: str) -> Optional[str]:
    at = text.find(value)
    return None if at < 0 else text[:at] + " " + text[at + len(value):]


def states_only(sentence: str, subject: str, predicate: str, obj: str) -> bool:
    """Whether ``sentence`` is a usable verbalization of the fact: one line ending with a period,
    ``subject`` and ``obj`` in it verbatim (case included), and no capitalized word or number
    beyond them that is not a word of ``predicate`` (a second entity, a date, a figure), with at
    most :data:`MAX_ADDED_WORDS` words added. A sentence-initial capital is not counted.

    >>> states_only("Alan Bean was born in Wheeler, Texas.", "Alan Bean", "birth place", "Wheeler, Texas")
    True
    >>> states_only("Alan Bean was born in Texas.", "Alan Bean", "birth place", "Wheeler, Texas")
    False
    >>> states_only("Alan Bean was born in Wheeler, Texas in 1932.", "Alan Bean", "birth place", "Wheeler, Texas")
    False
    """
    if not isinstance(sentence, str) or "\n" in sentence or not sentence.endswith(".") or not subject or not obj:
        return False
    rest = sentence
    # the longer value first: "Texas" inside "Wheeler, Texas" must not take the longer one's place
    for value in sorted((subject, obj), key=len, reverse=True):
        rest = _remove_once(rest, value)
        if rest is None:
            return False
    allowed = {w.lower() for w in _WORD.findall(predicate)}
    added = _WORD.findall(rest)
    if len(added) > MAX_ADDED_WORDS:
        return False
    first_word = sentence.lstrip()[:1].isalpha() and not sentence.startswith((subject, obj))
    for i, word in enumerate(added):
        if i == 0 and first_word:
            continue  # "The", "It": the sentence's own capital
        if (word[:1].isupper() or any(ch.isdigit() for ch in word)) and word.lower() not in allowed:
            return False
    return True


def training_target(sentence: str) -> str:
    return " " + _SPACES.sub(" ", sentence).strip()


class LearnedVerbalizer(Verbalizer):
    """Templates where they exist, the learned sentence where the predicate has none and the
    sentence passes :func:`states_only`, the back-off otherwise.

    ``model`` is a generator checkpoint (``checkpoints/nli_semantic_accuracy/verbalizer``) or an already loaded
    ``(tokenizer, model)`` pair; it is loaded on first need, so tables whose predicates all
    have templates never load it. :meth:`prepare` writes a batch of facts at once; a fact is
    generated once per object (greedy decoding: the same fact gives the same sentence).
    """

    def __init__(self, templates: Optional[Mapping[str, TemplateSpec]] = None, model=None, device: Optional[str] = None,
                 batch_size: int = 32, backoff: str = BACKOFF_TEMPLATE):
        super().__init__(templates, backoff)
        if model is None:
            raise ValueError("LearnedVerbalizer needs a generator checkpoint: model='checkpoints/nli_semantic_accuracy/verbalizer' or a path")
        self.model = model
        self.device = device
        self.batch_size = int(batch_size)
        self._learned: Dict[Tuple[str, str, str], Optional[str]] = {}
        self._loaded = None

    def _generator(self):
        if self._loaded is None:
            if isinstance(self.model, tuple):
                self._loaded = self.model
            else:
                from .generator import load_generator  # torch only when a fact needs the model

                tokenizer, model, _ = load_generator(self.model, device=self.device)
                self._loaded = (tokenizer, model)
        return self._loaded

    def needs_model(self, triple: Triple) -> bool:
        """Whether ``triple`` has no template (the back-off would verbalize it)."""
        return self.template_for(triple) is self.backoff

    def _asked(self, triples: Iterable[Triple], per_table: int) -> List[Optional[Tuple[str, str, str]]]:
        """Per triple of one table, its fields when the model writes it, else None: facts without
        a template, in table order, at most ``per_table`` of them, none longer than MAX_FACT_CHARS.
        A property of the table alone, so a fact's sentence never depends on the batch."""
        out, asked = [], 0
        for triple in triples:
            fields = fact_fields(triple) if self.needs_model(triple) else None
            if fields and asked < per_table and fields[0] and fields[2] and sum(map(len, fields)) <= MAX_FACT_CHARS:
                asked += 1
                out.append(fields)
            else:
                out.append(None)
        return out

    def prepare(self, tables: Iterable[Iterable[Triple]], show_progress: bool = False,
                per_table: int = MAX_LEARNED_PER_TABLE) -> None:
        """Write, in one batched run of the model, the sentences :meth:`table_sentences` will
        need for ``tables`` (each an iterable of triples)."""
        todo: Dict[Tuple[str, str, str], None] = {}  # ordered, each fact once
        for triples in tables:
            for fields in self._asked(triples, per_table):
                if fields is not None and fields not in self._learned:
                    todo[fields] = None
        if not todo:
            return
        from .generator import generate  # torch, only when a fact needs the model

        facts = list(todo)
        tokenizer, model = self._generator()
        sentences = generate(model, tokenizer, [prompt(*f) for f in facts], max_new_tokens=MAX_NEW_TOKENS,
                             batch_size=self.batch_size, show_progress=show_progress, desc="verbalizing facts")
        for fields, sentence in zip(facts, sentences):
            sentence = _SPACES.sub(" ", sentence).strip()
            self._learned[fields] = sentence if states_only(sentence, *fields) else None

    def table_sentences(self, triples: Iterable[Triple], per_table: int = MAX_LEARNED_PER_TABLE) -> List[Tuple[str, str]]:
        """``(sentence, source)`` per triple of one table, ``source`` one of :data:`SOURCES`."""
        triples = list(triples)
        self.prepare([triples], per_table=per_table)
        out = []
        for triple, fields in zip(triples, self._asked(triples, per_table)):
            learned = self._learned.get(fields) if fields is not None else None
            if learned:
                out.append((learned[:1].upper() + learned[1:], "learned"))
            else:
                out.append((Verbalizer.__call__(self, triple), Verbalizer.source_of(self, triple)))
        return out

    def source_of(self, triple: Triple) -> str:
        """``"template"``, ``"learned"`` or ``"backoff"``: what verbalizes ``triple`` alone."""
        return self.table_sentences([triple])[0][1]

    def __call__(self, triple: Triple) -> str:
        return self.table_sentences([triple])[0][0]

    def verbalize_table(self, table, subject: Optional[str] = None) -> List[str]:
        return [sentence for sentence, _ in self.table_sentences(table.to_triples(subject=subject))]
