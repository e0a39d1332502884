"""Loaders for the data sets the project evaluates on (WebNLG 2017 XML, E2E CSV/TSV).

These read files the user has; nothing is downloaded.
"""

from __future__ import annotations

import csv
import glob
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional

from .tables import Table, parse_mr, parse_triple, TRIPLES


@dataclass
class WebNLGEntry:
    eid: str
    category: str
    size: int
    table: Table  # the modified triple set
    lexicalizations: List[str]
    # Delexicalized templates (AGENT-1 …) with their entity map, where the corpus has them.
    templates: List[Optional[str]]
    references: List[Dict[str, str]]  # per lexicalization: tag -> entity
    path: str = ""
    # Per lexicalization: tag -> the words the tag stands for in the text
    # ("a test pilot" for PATIENT-1 = Test_pilot), where the corpus has them.
    mentions: List[Dict[str, str]] = field(default_factory=list)


def load_webnlg_xml(path: str) -> List[WebNLGEntry]:
    """Read WebNLG XML files from a file or a directory (searched recursively).

    Each entry carries its modified triple set as a :class:`Table` and its
    lexicalizations. Works for v1.x (enriched) and v2/v3 files.
    """
    files = [path] if os.path.isfile(path) else sorted(glob.glob(os.path.join(path, "**", "*.xml"), recursive=True))
    if not files:
        raise ValueError(f"no WebNLG XML files found under {path!r}")
    entries: List[WebNLGEntry] = []
    for f in files:
        root = ET.parse(f).getroot()
        for entry in root.iter("entry"):
            triples = [parse_triple(t.text.strip()) for t in entry.iter("mtriple")]
            lexs, templates, refs, mentions = [], [], [], []
            for lex in entry.iter("lex"):
                text_el = lex.find("text")
                text = (text_el.text if text_el is not None else lex.text) or ""
                text = " ".join(text.split())
                if not text:
                    continue
                lexs.append(text)
                tmpl_el = lex.find("template")
                templates.append(" ".join(tmpl_el.text.split()) if tmpl_el is not None and tmpl_el.text else None)
                refs.append({r.get("tag"): r.get("entity") for r in lex.iter("reference")})
                mentions.append({r.get("tag"): " ".join((r.text or "").split()) for r in lex.iter("reference")})
            entries.append(
                WebNLGEntry(
                    eid=entry.get("eid", ""),
                    category=entry.get("category", ""),
                    size=int(entry.get("size", len(triples))),
                    table=Table(triples, kind=TRIPLES),
                    lexicalizations=lexs,
                    templates=templates,
                    references=refs,
                    path=f,
                    mentions=mentions,
                )
            )
    return entries


@dataclass
class E2EExample:
    mr: str
    table: Table
    references: List[str]


def load_e2e_csv(path: str) -> List[E2EExample]:
    """Read an E2E CSV (``mr,ref``) or TSV file, grouping references by MR in file order."""
    tsv = path.endswith(".tsv")
    grouped: Dict[str, List[str]] = {}
    with open(path, newline="", encoding="utf-8-sig") as f:
        # E2E TSV files leave quotes unescaped (an output may contain a lone "), so read them verbatim.
        reader = csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE) if tsv else csv.DictReader(f)
        for row in reader:
            mr = row["mr"]
            ref = row.get("ref") or row.get("output") or ""
            grouped.setdefault(mr, [])
            if ref:
                grouped[mr].append(ref)
    return [E2EExample(mr=mr, table=parse_mr(mr), references=refs) for mr, refs in grouped.items()]


def iter_tsv(path: str) -> Iterator[Dict[str, str]]:
    """Rows of a tab-separated file with a header, as dicts."""
    with open(path, newline="", encoding="utf-8-sig") as f:
        yield from csv.DictReader(f, delimiter="\t", quoting=csv.QUOTE_NONE)


def shared_dir() -> Optional[str]:
    """The project's ``../shared`` folder, or ``$D2T_SHARED``; ``None`` when absent."""
    env = os.environ.get("D2T_SHARED")
    if env:
        return env if os.path.isdir(env) else None
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    candidate = os.path.join(os.path.dirname(here), "shared")
    return candidate if os.path.isdir(candidate) else None
