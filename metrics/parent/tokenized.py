"""PARENT's input checks: raw texts, or pre-tokenized predictions, references and tables
(PARENT's own forms), checked before evaluate stores them."""

from itertools import repeat

from d2t_metrics.inputs import as_list
from d2t_metrics.inputs import check_encoded
from d2t_metrics.inputs import check_references
from d2t_metrics.inputs import check_text
from d2t_metrics.inputs import check_texts
from d2t_metrics.tables import short_repr

from .table_tokens import encode_token_table


def is_token_list(obj) -> bool:
    return isinstance(obj, (list, tuple)) and all(map(isinstance, obj, repeat(str)))


def normalize_inputs(predictions, references, offset=0):
    """Check predictions and references and bring references to one list per example.

    Raises ValueError naming the example index. Predictions are all strings
    (raw mode) or all token lists (pre-tokenized mode).
    """
    predictions = as_list(predictions, "predictions")
    tokenized = bool(predictions) and isinstance(predictions[0], (list, tuple))
    if not tokenized:
        predictions = check_texts(predictions, "predictions", offset=offset)
        return predictions, check_references(references, len(predictions), offset=offset), False
    references = as_list(references, "references")
    if len(references) != len(predictions):
        raise ValueError(f"got {len(predictions)} predictions but {len(references)} references; pass exactly one entry per prediction")
    out_refs = []
    for i, (pred, refs) in enumerate(zip(predictions, references)):
        i += offset
        if not is_token_list(pred):
            raise ValueError(f"example {i}: prediction must be a list of token strings like the others, got {short_repr(pred)}")
        for token in pred:
            check_text(token, "prediction token", i)
        if refs is None:
            raise ValueError(f"example {i}: reference is None")
        if is_token_list(refs) and (not refs or isinstance(refs[0], str)):
            refs = [refs]  # one tokenized reference
        refs = list(refs)
        if not refs:
            raise ValueError(f"example {i}: no reference given")
        for r in refs:
            if not is_token_list(r):
                raise ValueError(f"example {i}: a tokenized reference must be a list of strings, got {short_repr(r)}")
            for token in r:
                check_text(token, "reference token", i)
        out_refs.append([list(r) for r in refs])
    return [list(p) for p in predictions], out_refs, True


def checked_columns(given, offset):
    """Every input of one call checked and encoded; raises ``ValueError`` naming the example."""
    predictions, references, _ = normalize_inputs(given.get("predictions"), given.get("references"), offset)
    tables = as_list(given.get("tables"), "tables") if given.get("tables") is not None else None
    if tables is None:
        raise ValueError("tables is None; PARENT needs one table per prediction (tables=...)")
    if len(tables) != len(predictions):
        raise ValueError(f"got {len(predictions)} predictions but {len(tables)} tables; pass exactly one table per prediction")
    encoded, memo = [], {}
    for i, table in enumerate(tables):
        if isinstance(table, str) and table in memo:  # one input table, many systems' outputs
            encoded.append(memo[table])
            continue
        value = check_encoded(encode_token_table(table, offset + i), "table", offset + i)
        if isinstance(table, str):
            memo[table] = value
        encoded.append(value)
    return {"predictions": predictions, "references": references, "tables": encoded}
