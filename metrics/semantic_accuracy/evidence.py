"""Per-fact verdicts merging the evidence of each component, and the text's unsupported claims.

A table fact is a triple ``"subject | predicate | object"`` (an E2E record's
name is the subject of its other slots, as in nli_semantic_accuracy). Each
component's evidence is put on the fact it is about:

* nli_semantic_accuracy: the omission check whose ``fact`` is this triple
  (its hypothesis sentence and entailment probability);
* data_questeval: the questions generated from the table about this fact's
  object value (matched by :func:`value_key`), answered on the text;
* fact_accuracy: ``found`` unless the fact is among its ``missing`` ground-truth
  facts, with the text's fact that states it (same subject, relation and object);
  a missing fact is ``contradicted`` when a text fact has its subject and relation
  and expects its object, else ``missing``. Text facts carry their evidence
  sentence and span when the extractor gave them;
* dae: the arcs of the fact's sentence checked against the text (their pooled
  ``score`` and ``covered``). Shown, not voted: its per-fact verdict has not
  been measured against per-fact labels.
"""

import unicodedata
from typing import Dict, List, Mapping, Optional, Sequence

# data_questeval's threshold for an answer the text gives (its EXPLAIN_THRESHOLD)
ANSWERED = 0.5


def value_key(value: str) -> str:
    """A value as compared across components: case, accents, underscores, spaces and
    punctuation dropped ("Wheeler,_Texas", "Wheeler , Texas" and "wheeler texas" meet)."""
    text = unicodedata.normalize("NFKD", str(value))
    return "".join(ch for ch in text.lower() if ch.isalnum())


def _fact_key(subject: str, relation: str, obj: str):
    return value_key(subject), value_key(relation), value_key(obj)


def split_fact(fact: str):
    subject, relation, obj = (part.strip() for part in fact.split(" | ", 2))
    return subject, relation, obj


# ---------------------------------------------------------------- each component


def nli_evidence(nli: Optional[Mapping], fact: str) -> Optional[Dict]:
    for check in (nli or {}).get("checks") or []:
        if check.get("type") == "omission" and check.get("fact") == fact:
            return {"sentence": check.get("hypothesis"), "entailment": float(check["probabilities"].get("entailment", 0.0)),
                    "entailed": bool(check.get("entailed"))}
    return None


def qa_evidence(dqe: Optional[Mapping], fact: str) -> Optional[Dict]:
    """The table questions about the fact's object value, answered on the text."""
    if not dqe:
        return None
    table = next((s for s in dqe.get("sources") or [] if s.get("source") == "table"), None)
    wanted = value_key(split_fact(fact)[2])
    questions = [q for q in (table or {}).get("from_source") or [] if wanted and value_key(q.get("answer", "")) == wanted]
    if not questions:
        return None
    score = sum(q["score"] for q in questions) / len(questions)
    return {"value": questions[0].get("answer"), "score": round(score, 6), "answered": score >= ANSWERED,
            "questions": [{k: q.get(k) for k in ("question", "predicted", "score")} for q in questions]}


def fact_accuracy_evidence(fa: Optional[Mapping], fact: str) -> Optional[Dict]:
    if not fa:
        return None
    s, r, o = _fact_key(*split_fact(fact))
    same = lambda f: (value_key(f.get("subject", "")), value_key(f.get("relation", ""))) == (s, r)  # noqa: E731
    missing = any(_fact_key(f.get("subject", ""), f.get("relation", ""), f.get("object", "")) == (s, r, o)
                  for f in fa.get("missing") or [])
    stated = next((f for f in fa.get("supported") or [] if same(f) and value_key(f.get("object", "")) == o), None)
    against = next((f for f in fa.get("contradicted") or []
                    if same(f) and o in {value_key(e) for e in f.get("expected") or []}), None)
    # Found wins: a fact the text states (fact_accuracy does not call it missing) is not contradicted by
    # another extracted object for it, which is more often an extraction slip ("894 metres above sea level").
    if stated or not missing:
        return {"status": "found", "text_fact": stated, **({"also_extracted": against} if against else {})}
    return {"status": "contradicted" if against else "missing", "text_fact": against}


def dae_evidence(dae: Optional[Mapping], fact: str) -> Optional[Dict]:
    """DAE's check of the fact's sentence against the text (``direction="both"``)."""
    for entry in (dae or {}).get("facts") or []:
        if entry.get("fact") == fact:
            return {"sentence": entry.get("sentence"), "score": entry.get("score"), "covered": entry.get("covered")}
    return None


# ---------------------------------------------------------------- merged


def verdict(nli: Optional[Dict], qa: Optional[Dict], fa: Optional[Dict]) -> str:
    """``contradicted`` when fact_accuracy finds the text stating another object; else the
    majority of the components' votes (NLI entailed, QA answered, fact_accuracy found):
    ``stated``, ``omitted``, or ``unsure`` on a tie or without votes."""
    if fa and fa["status"] == "contradicted":
        return "contradicted"
    votes = []
    if nli is not None:
        votes.append(nli["entailed"])
    if qa is not None:
        votes.append(qa["answered"])
    if fa is not None:
        votes.append(fa["status"] == "found")
    yes, no = sum(votes), len(votes) - sum(votes)
    return "stated" if yes > no else "omitted" if no > yes else "unsure"


def fact_verdicts(facts: Sequence[str], parts: Mapping[str, Mapping]) -> List[Dict]:
    fa_part = next((p for n, p in parts.items() if n.startswith("fact_accuracy")), None)
    out = []
    for fact in facts:
        nli = nli_evidence(parts.get("nli_semantic_accuracy"), fact)
        qa = qa_evidence(parts.get("data_questeval"), fact)
        fa = fact_accuracy_evidence(fa_part, fact)
        dae = dae_evidence(parts.get("dae"), fact)
        out.append({"fact": fact, "verdict": verdict(nli, qa, fa), "nli": nli, "qa": qa, "fact_accuracy": fa,
                    **({"dae": dae} if dae else {})})
    return out


def text_claims(parts: Mapping[str, Mapping]) -> List[Dict]:
    """What the text says that no table fact supports: fact_accuracy's contradicted and
    unverifiable facts, data_questeval's unsupported answers."""
    claims = []
    for name, part in parts.items():
        if name.startswith("fact_accuracy"):
            for status in ("contradicted", "unverifiable"):
                claims += [{"by": name, "status": status, **f} for f in part.get(status) or []]
    for answer in (parts.get("data_questeval") or {}).get("unsupported") or []:
        claims.append({"by": "data_questeval", "status": "unsupported", "answer": answer})
    return claims


def table_facts(table) -> List[str]:
    """The facts of a parsed table as nli_semantic_accuracy names them."""
    return [str(t) for t in table.to_triples()]
