"""Training pairs of the learned verbalizer: WebNLG's single-triple entries, each
lexicalisation that states its fact and nothing else (``learned_verbalizer.states_only``,
the same test the sentences it writes must pass) as a (prompt, target) pair."""

from __future__ import annotations

import random
from typing import Dict, List, Sequence, Tuple

from d2t_metrics.learned_verbalizer import fact_fields
from d2t_metrics.learned_verbalizer import prompt
from d2t_metrics.learned_verbalizer import states_only
from d2t_metrics.learned_verbalizer import training_target


def training_pairs(entries: Sequence, seed: int = 13) -> Tuple[List[Tuple[str, str]], Dict[str, int]]:
    """``(pairs, counts)``: a shuffled (prompt, target) pair per usable lexicalisation of the
    single-triple ``entries`` (``d2t_metrics.datasets.WebNLGEntry``), each pair once."""
    pairs, seen = [], set()
    counts = {"entries": 0, "lexicalisations": 0, "kept": 0, "predicates": 0}
    predicates = set()
    for entry in entries:
        if len(entry.table) != 1:
            continue
        counts["entries"] += 1
        fields = fact_fields(entry.table[0])
        for text in entry.lexicalizations:
            counts["lexicalisations"] += 1
            sentence = " ".join(str(text).split())
            pair = (prompt(*fields), training_target(sentence))
            if pair in seen or not states_only(sentence, *fields):
                continue
            seen.add(pair)
            pairs.append(pair)
            predicates.add(fields[1])
    counts["kept"] = len(pairs)
    counts["predicates"] = len(predicates)
    random.Random(seed).shuffle(pairs)
    return pairs, counts
