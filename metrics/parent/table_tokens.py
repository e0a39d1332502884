"""Tables as PARENT sees them: a list of ``(attribute tokens, value tokens)`` entries.

PARENT only looks at the *values* of a table for word-overlap entailment and
for table recall (longest common subsequence against the text); the
co-occurrence model also uses one token per attribute name. Entries are built
the way the reference implementation and its WebNLG script build them:

* a triple ``(head, relation, tail)`` becomes ``([relation], tokens(head) +
  tokens(tail))`` with underscores turned into spaces before tokenizing; the
  relation is kept whole, as one token, and is not lowercased (it is ignored
  except by the co-occurrence model);
* an attribute-value record (E2E slot, WikiBio field) becomes
  ``(tokens(attribute), tokens(value))``.

Nothing else is normalized: quotes, brackets and punctuation stay, exactly as
the tokenizer produces them.

Pre-tokenized tables are accepted as they are: a list of ``[attribute_tokens,
value_tokens]`` pairs (the form of the golden files) or of ``[head_tokens,
relation_tokens, tail_tokens]`` triples, which become ``(relation_tokens,
head_tokens + tail_tokens)`` (the same tokens the reference uses for triples).
"""

from __future__ import annotations

import json
from itertools import repeat
from typing import Any, Callable, List, Optional, Sequence, Tuple

from d2t_metrics.tables import Table, parse_table

TokenEntry = Tuple[Tuple[str, ...], Tuple[str, ...]]
TokenTable = Tuple[TokenEntry, ...]

TOKENS = "tokens"
_TOKENS_PREFIX = '{"kind": "tokens"'


def _where(index: Optional[int]) -> str:
    return "" if index is None else f"example {index}: "


def _is_token_list(obj: Any) -> bool:
    return isinstance(obj, (list, tuple)) and all(map(isinstance, obj, repeat(str)))


def is_pretokenized_table(table: Any) -> bool:
    """True for a list of entries whose members are all token lists (not strings)."""
    if not isinstance(table, (list, tuple)) or not table:
        return False
    for entry in table:
        if not isinstance(entry, (list, tuple)) or len(entry) not in (2, 3):
            return False
        if not all(isinstance(member, (list, tuple)) for member in entry):
            return False
    return True


def pretokenized_table(table: Sequence, index: Optional[int] = None) -> TokenTable:
    """Check and convert a pre-tokenized table (pairs or triples of token lists)."""
    entries = []
    for k, entry in enumerate(table):
        if not all(_is_token_list(member) for member in entry):
            raise ValueError(f"{_where(index)}pre-tokenized table entry {k} must hold lists of strings, got {entry!r}")
        if len(entry) == 2:
            attribute, value = entry
            entries.append((tuple(attribute), tuple(value)))
        else:
            head, relation, tail = entry
            entries.append((tuple(relation), tuple(head) + tuple(tail)))
    return tuple(entries)


def table_to_tokens(table: Table, tokenize: Callable[[str], Sequence[str]]) -> TokenTable:
    """Token entries of a parsed :class:`~d2t_metrics.tables.Table` (see the module docstring)."""
    entries = []
    if table.is_triples:
        for triple in table.entries:
            value = tuple(tokenize(triple.subject.replace("_", " "))) + tuple(tokenize(triple.object.replace("_", " ")))
            entries.append(((triple.predicate,), value))
    else:
        for record in table.entries:
            entries.append((tuple(tokenize(record.attribute)), tuple(tokenize(record.value))))
    return tuple(entries)


def check_token_table(table: TokenTable, index: Optional[int] = None) -> TokenTable:
    """Refuse tables PARENT cannot score: no entries, or no entry with a value token.

    Entries whose value has no tokens are kept here; the scorer leaves them out
    of table recall and of the λ heuristic (see the metric card).
    """
    if not table:
        raise ValueError(f"{_where(index)}empty table")
    if not any(value for _, value in table):
        raise ValueError(f"{_where(index)}table has no value tokens: every entry's value is empty")
    return table


def to_token_table(table: Any, tokenize: Callable[[str], Sequence[str]], index: Optional[int] = None) -> TokenTable:
    """Token entries of a table in any form: pre-tokenized, or anything ``parse_table`` reads."""
    if table is None:
        raise ValueError(f"{_where(index)}table is None")
    if is_pretokenized_table(table):
        return check_token_table(pretokenized_table(table, index), index)
    return check_token_table(table_to_tokens(parse_table(table, index), tokenize), index)


def encode_token_table(table: Any, index: Optional[int] = None) -> str:
    """A table as PARENT stores it in evaluate's ``tables`` column.

    Pre-tokenized tables are checked and kept as tokens
    (``{"kind": "tokens", "entries": ...}``); any other form is parsed and
    stored canonically (``d2t_metrics.inputs.encode_table``), so the tokenizer
    chosen at compute time still applies."""
    from d2t_metrics.inputs import encode_table

    if table is None:
        raise ValueError(f"{_where(index)}table is None")
    if is_pretokenized_table(table):
        check_token_table(pretokenized_table(table, index), index)
        return json.dumps({"kind": TOKENS, "entries": [[list(member) for member in entry] for entry in table]}, ensure_ascii=False)
    return encode_table(table, index)


def decode_token_table(encoded: str, tokenize: Callable[[str], Sequence[str]], index: Optional[int] = None) -> TokenTable:
    """The token entries of a stored table (see :func:`encode_token_table`)."""
    from d2t_metrics.inputs import decode_table

    if encoded.startswith(_TOKENS_PREFIX):
        return check_token_table(pretokenized_table(json.loads(encoded)["entries"], index), index)
    return check_token_table(table_to_tokens(decode_table(encoded, index), tokenize), index)


def to_token_tables(encoded: Sequence[str], tokenize: Callable[[str], Sequence[str]]) -> List[TokenTable]:
    """Token tables of a stored column; a table repeated across examples is built once."""
    memo = {}
    out = []
    for i, value in enumerate(encoded):
        built = memo.get(value)
        if built is None:
            built = memo[value] = decode_token_table(value, tokenize, i)
        out.append(built)
    return out
