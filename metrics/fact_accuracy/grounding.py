"""How the end-to-end extractor reads an untrusted text, and where its facts stand in it.

The text is data, never instructions, and every fact the extractor reports must be
supported by a span of the text. Four pure steps, each testable without a model:

1. :func:`clean_with_offsets`: ``d2t_metrics.untrusted.plain_text`` (NUL, zero-width and
   bidi characters dropped), with the offset of every kept character in the given text,
   so that evidence spans point into the prediction as the user wrote it.
2. :func:`blank_repeats`: a run of words said twice in a row ("X was born in Y. X was born
   in Y.", or a run-on text doubled) is read once: the second copy is blanked. Saying a
   fact again states nothing new, and a doubled text read in other windows made the model
   read other facts (issue #38's ``repeated_sentence``).
3. :func:`blank_format_imitation`: what is not a claim of the text
   (``d2t_metrics.untrusted.blank_non_claims``, shared by every metric: a tokenizer's
   control tokens such as ``</s>``, ``[SEP]``, ``<|endoftext|>``; ``s | r | o`` triples and
   the ``Triples:``/``Table:`` labels before them; sentences addressed to the evaluator,
   "Ignore the previous instructions ...", "Disregard the first sentence.") and, on top,
   what imitates this extractor's own output or prompt (a stray ``|``, the prompt's
   ``Triples:``/``Text:``/``Relations:`` labels with the rest of their line, a sentence
   naming a listed schema relation such as ``birthPlace`` verbatim) is replaced by spaces
   of the same length: the model never reads it, no fact can be grounded in it, and
   offsets are kept.
4. :func:`reading_units`: the sentences to read, as character ranges (a sentence longer
   than ``max_words`` words is cut between words), at most ``max_units`` of them: the
   bound on an example's work; the rest is not read (``truncated``).
5. :func:`find_value`: where a fact's subject or object is written in a range of the
   text, compared as the matcher compares values (case, accents, punctuation and
   underscores folded; ``Marie_Curie`` = ``Marie Curie``, ``Test pilot`` = ``test
   pilot``), else by the value's head before a comma (``Wheeler, Texas`` read off
   "Wheeler"), its initials (``United States`` for "U.S."), a fuzzy match of a word
   window (the matcher's ``difflib`` ratio, same digits), or a date or a number with its
   unit read as such (``1930-03-15`` for "March 15, 1930"). ``None``: the value is not in
   the text, and a fact using it is *ungrounded*.
"""

from __future__ import annotations

import re
from typing import List, NamedTuple, Optional, Sequence, Tuple

from d2t_metrics.untrusted import blank_non_claims
from d2t_metrics.untrusted import merge_spans
from d2t_metrics.untrusted import has_invisible
from d2t_metrics.untrusted import plain_text

from .matching import Matcher
from .matching import _fold
from .matching import normalize_text
from .matching import read_value

# A word of the text as the matcher sees words: letters and digits (underscore separates).
_WORD = re.compile(r"[^\W_]+")
# A date or a number with its unit is at most this many words ("the 15th of March 1930").
MAX_QUANTITY_WORDS = 6
# The fuzzy comparison of word windows stops after this many windows per value (a bound
# on matching work; a unit holds at most 2 x WINDOW_WORDS words, so this is rarely reached).
MAX_FUZZY_WINDOWS = 2000
# A value's head (before its first comma or bracket) grounds it only if this long:
# "Wheeler" for "Wheeler, Texas", not "A" for "A, B".
MIN_HEAD_CHARS = 3
# A repeat is at least this many words with a letter or digit ("It is red. It is red."), at
# most MAX_REPEAT_WORDS in all; the search for repeats stops after MAX_REPEAT_SCAN kept
# words (far more than a reading's bound): its work is linear in the text.
MIN_REPEAT_WORDS = 3
MAX_REPEAT_WORDS = 400
MAX_REPEAT_SCAN = 8000
_TOKEN = re.compile(r"\S+")
_ALNUM = re.compile(r"[^\W_]")


def clean_with_offsets(text: str) -> Tuple[str, List[int]]:
    """``plain_text(text)`` and, for each of its characters, its index in ``text``."""
    if not has_invisible(text):
        return text, list(range(len(text)))
    kept = [i for i, ch in enumerate(text) if not has_invisible(ch)]
    clean = "".join(text[i] for i in kept)
    assert clean == plain_text(text)  # the shared definition of what a reader sees
    return clean, kept


_PIPE = re.compile(r"\|")
# a prompt label and the rest of its line ("Text: <an injected text>", "Triples: ...")
_PROMPT_LABEL = re.compile(r"\b(?:triples|text|relations)\s*:[^\n]*", re.IGNORECASE)
_SENTENCE = re.compile(r"[^.!?\n]*(?:[.!?]+|\n|$)")


def _blank_all(text: str, spans: Sequence[Tuple[int, int]]) -> str:
    """``text`` with each ``(start, end)`` range replaced by spaces of its length."""
    if not spans:
        return text
    chars = list(text)
    for start, end in spans:
        chars[start:end] = " " * (end - start)
    return "".join(chars)


def schema_names(relations: Sequence[str]) -> List[str]:
    """The listed relations that no prose would write as they are: camelCase or with an
    underscore (``birthPlace``, ``runway_length``; not ``country``)."""
    return [r for r in dict.fromkeys(relations or ()) if re.fullmatch(r"[A-Za-z]+(?:[A-Z_][A-Za-z]*)+", r)
            and re.search(r"[a-z][A-Z]|_", r)]


def blank_format_imitation(text: str, relations: Sequence[str] = (), values: Sequence[str] = ()) -> Tuple[str, List[Tuple[int, int]]]:
    """``text`` with what is not a claim, or imitates the extractor's output or prompt,
    replaced by spaces (module docstring), and the blanked ranges, in order. ``values``: the
    table's, whose bare list at the text's end states no fact (``untrusted.value_list_spans``)."""
    original = text
    # what no metric reads (control tokens, imitated inputs, instructions, a list of the table's
    # values at the end): the shared definition
    text, spans = blank_non_claims(text, values=values)
    # what only this extractor's prompt and output look like (blanked at once: linear work)
    extra = [m.span() for pattern in (_PIPE, _PROMPT_LABEL) for m in pattern.finditer(text) if m.group().strip()]
    text = _blank_all(text, extra)
    names = schema_names(relations)
    if names:
        named = re.compile(r"(?<![A-Za-z_])(?:" + "|".join(map(re.escape, names)) + r")(?![A-Za-z_])")
        sentences = [m.span() for m in _SENTENCE.finditer(text) if m.group().strip() and named.search(m.group())]
        text = _blank_all(text, sentences)
        extra += sentences
    # one range per blanked piece (overlaps and whitespace-separated neighbours joined)
    return text, merge_spans(list(spans) + extra, original)


def _repeat_ending_at(kept: List[Tuple[str, int, int]], earlier: Sequence[int]) -> Optional[List[Tuple[str, int, int]]]:
    """The second copy of the shortest run of words said twice in a row that ends with
    ``kept``'s last word, or ``None``; ``earlier``: the indices of that word before it."""
    j = len(kept) - 1
    for p in reversed(earlier):
        n = j - p  # a run of n words whose first copy ends at p
        if n > MAX_REPEAT_WORDS or 2 * n > j + 1:
            return None
        if n < MIN_REPEAT_WORDS:
            continue
        # compared from the end, stopping at the first difference: the work is the match's length
        k = 1
        while k < n and kept[p - k][0] == kept[j - k][0]:
            k += 1
        second = kept[j + 1 - n:]
        if k == n and sum(1 for w in second if _ALNUM.search(w[0])) >= MIN_REPEAT_WORDS:
            return second
    return None


def blank_repeats(text: str) -> Tuple[str, List[Tuple[int, int]]]:
    """``text`` with the second copy of each run of words said twice in a row replaced by
    spaces (case folded to compare; punctuation is part of a word), and the blanked ranges.
    Words are read in order and a repeat is dropped as soon as it is complete, so a sentence
    said three times is read once, and a text and its doubled form read the same."""
    kept: List[Tuple[str, int, int]] = []  # (folded word, start, end) of the words read
    seen: dict = {}  # folded word -> its indices in ``kept`` (stale ones skipped)
    spans: List[Tuple[int, int]] = []
    for m in _TOKEN.finditer(text):
        if len(kept) >= MAX_REPEAT_SCAN:
            break
        word = m.group().casefold()
        j = len(kept)
        kept.append((word, m.start(), m.end()))
        second = _repeat_ending_at(kept, seen.get(word, ()))
        if second is None:
            seen.setdefault(word, []).append(j)
            continue
        spans.append((second[0][1], second[-1][2]))
        del kept[j + 1 - len(second):]
        # the blanked words' indices are stale (they are the largest): drop them
        for positions in (seen.get(w[0]) for w in second):
            while positions and positions[-1] >= len(kept):
                positions.pop()
    return _blank_all(text, spans), spans


# A sentence ends at . ! ? followed by whitespace, or at a blank line; not after an initial
# or abbreviation ("carl a. wirtanen", "U.S. Army", "Dr."): WebNLG texts are full of them.
# A single line break is whitespace: texts wrapped by an editor or a system break lines
# inside sentences, and reading one as a sentence end changed the facts read (issue #38).
_END_MARK = re.compile(r"[.!?]+(?=\s)|\n[^\S\n]*\n")
ABBREVIATIONS = frozenset("mr mrs ms dr st jr sr co inc ltd no vs mt ft lt gen col sgt prof approx est".split())


def sentence_ranges(text: str) -> List[Tuple[int, int]]:
    """The sentences of ``text`` as ``(start, end)`` ranges (module docstring); blank ones left out."""
    out, start = [], 0
    for m in _END_MARK.finditer(text):
        if m.group() == ".":
            word = re.search(r"\S*$", text[start:m.start()]).group()
            if len(word) == 1 or "." in word or word.lower() in ABBREVIATIONS:
                continue
        out.append((start, m.end()))
        start = m.end()
    out.append((start, len(text)))
    return [(a, b) for a, b in out if text[a:b].strip()]


def reading_units(text: str, max_words: int, max_units: int) -> Tuple[List[Tuple[int, int]], bool]:
    """The sentences of ``text`` to read, as ``(start, end)`` ranges, at most ``max_words``
    words each (a longer sentence is cut between words) and ``max_units`` in all; a range
    without a letter or digit is skipped. Also whether anything readable was left out."""
    units: List[Tuple[int, int]] = []
    for start, end in sentence_ranges(text):
        words = list(re.finditer(r"\S+", text[start:end]))
        for i in range(0, len(words), max(1, max_words)):
            piece = words[i:i + max_words]
            lo, hi = start + piece[0].start(), start + piece[-1].end()
            if not _WORD.search(text, lo, hi):
                continue
            if len(units) == max_units:
                return units, True
            units.append((lo, hi))
    return units, False


class Word(NamedTuple):
    text: str  # folded as the matcher folds
    start: int
    end: int


def words_of(text: str, start: int = 0, end: Optional[int] = None) -> List[Word]:
    """The words of ``text[start:end]`` with their offsets in ``text``."""
    end = len(text) if end is None else end
    return [Word(_fold(m.group()), m.start(), m.end()) for m in _WORD.finditer(text, start, end)]


def _find_words(needle: Sequence[str], words: Sequence[Word]) -> Optional[Tuple[int, int]]:
    n = len(needle)
    if not n:
        return None
    for i in range(len(words) - n + 1):
        if all(words[i + k].text == needle[k] for k in range(n)):
            return words[i].start, words[i + n - 1].end
    return None


def _head(value: str) -> str:
    """``Wheeler, Texas`` → ``Wheeler``; ``Nobel Prize (1919)`` → ``Nobel Prize``;
    ``(29075) 1950 DA`` → ``1950 DA``."""
    return re.split(r"[,(]", re.sub(r"^\s*\([^()]*\)", "", value), maxsplit=1)[0]


def _initials(value: str) -> str:
    words = normalize_text(value).split()
    return "".join(w[0] for w in words) if len(words) >= 2 else ""


def find_value(value: str, text: str, words: Sequence[Word], matcher: Matcher) -> Optional[Tuple[int, int]]:
    """Where ``value`` is written among ``words`` (of ``text``): a ``(start, end)`` range
    of ``text``, or ``None`` (module docstring)."""
    target = normalize_text(value).split()
    found = _find_words(target, words)
    if found:
        return found
    kind = read_value(value).kind
    if kind in ("date", "number"):
        # a date or quantity as written in the text ("March 15, 1930" for 1930-03-15)
        for i in range(len(words)):
            for n in range(1, MAX_QUANTITY_WORDS + 1):
                if i + n > len(words):
                    break
                span = (words[i].start, words[i + n - 1].end)
                # as written ("2,776 metres"), or its words alone ("march 15th , 1930")
                if matcher.same_value(text[span[0]:span[1]], value) \
                        or matcher.same_value(" ".join(w.text for w in words[i:i + n]), value):
                    return span
        return None
    head = normalize_text(_head(value)).split()
    if head != target and len("".join(head)) >= MIN_HEAD_CHARS:
        found = _find_words(head, words)
        if found:
            return found
    initials = _initials(value)
    if initials:
        for i in range(len(words)):
            # "U.S." is the words "u", "s"; "USA" one word
            for n in (1, len(initials)):
                if i + n <= len(words) and "".join(w.text for w in words[i:i + n]) == initials \
                        and (n == 1 or all(len(w.text) == 1 for w in words[i:i + n])):
                    return words[i].start, words[i + n - 1].end
    if matcher.fuzzy_threshold is not None and target:
        joined = " ".join(target)
        tried = 0
        for n in sorted({max(1, len(target) - 1), len(target), len(target) + 1}):
            for i in range(len(words) - n + 1):
                tried += 1
                if tried > MAX_FUZZY_WINDOWS:
                    return None
                if matcher._fuzzy(" ".join(w.text for w in words[i:i + n]), joined):
                    return words[i].start, words[i + n - 1].end
    return None
