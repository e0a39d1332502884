"""benchmarks.reference_labels: which references are read, the raters' shares, the label counts
per half and the rendered section (no model runs here)."""

import pytest

from benchmarks import reference_labels as rl

XML = """<?xml version="1.0" ?>
<benchmark><entries>
<entry category="Astronaut" eid="Id1" size="1">
  <modifiedtripleset><mtriple>Alan_Bean | birthPlace | Wheeler,_Texas</mtriple></modifiedtripleset>
  <lex comment="good" lid="Id1"><text>Alan Bean was born in Wheeler, Texas.</text></lex>
  <lex comment="good" lid="Id2"><text>Wheeler, Texas is where Alan Bean was born.</text></lex>
</entry>
<entry category="Athlete" eid="Id2" size="1">
  <modifiedtripleset><mtriple>Aaron_Hunt | club | SV_Werder_Bremen</mtriple></modifiedtripleset>
  <lex comment="good" lid="Id1"><text>Aaron Hunt plays for SV Werder Bremen.</text></lex>
</entry>
</entries></benchmark>
"""


def test_references_take_at_most_per_entry_texts_and_split_by_category(tmp_path):
    (tmp_path / "test.xml").write_text(XML, encoding="utf-8")
    first = rl.references(str(tmp_path), 1, ["Athlete"])
    assert [r["text"] for r in first] == ["Alan Bean was born in Wheeler, Texas.", "Aaron Hunt plays for SV Werder Bremen."]
    assert [r["half"] for r in first] == ["seen", "unseen"]
    assert first[0]["table"] == ["Alan_Bean | birthPlace | Wheeler,_Texas"]
    assert len(rl.references(str(tmp_path), 0, ["Athlete"])) == 3


def test_rater_shares_count_only_the_reference_rows(tmp_path):
    path = tmp_path / "human_eval.csv"
    path.write_text("team,category,semantics\nwebnlg,Astronaut,3.0\nwebnlg,Astronaut,2.2\nadapt,Astronaut,1.0\n"
                    "webnlg,Athlete,1.5\n", encoding="utf-8")
    shares = rl.rater_ok_shares(str(path), ["Athlete"])
    assert shares["seen"] == {"n": 2, ">=2.0": 1.0, ">=2.5": 0.5}
    assert shares["unseen"] == {"n": 1, ">=2.0": 0.0, ">=2.5": 0.0}


def test_label_counts_per_half_and_all():
    counts = rl.label_counts(["OK", "omission", "OK", "hallucination"], ["seen", "seen", "unseen", "unseen"])
    assert counts["seen"] == {"n": 2, "ok_share": 0.5, "not_ok": {"omission": 1}}
    assert counts["all"]["ok_share"] == 0.5 and counts["all"]["not_ok"] == {"hallucination": 1, "omission": 1}
    assert rl.label_counts([], [])["all"]["ok_share"] is None
    with pytest.raises(ValueError):
        rl.label_counts(["OK"], [])


def test_render_lists_each_stored_run_in_order():
    labels = rl.label_counts(["OK", "not OK"], ["seen", "unseen"])
    data = {"runs": {"fact_accuracy": {"labels": labels, "seconds": 3.0, "signature": "fa|x"},
                     "nli": {"labels": labels, "seconds": 1.0, "signature": "nli|x"}},
            "raters": {"seen": {"n": 2, ">=2.0": 1.0, ">=2.5": 0.5}}, "command": "cmd", "per_entry_note": "all references"}
    text = rl.render(data)
    assert text.index("`nli`") < text.index("`fact_accuracy`")
    assert "| `nli` | 100.0% | 0.0% | 50.0% | 2 | not OK 1 | 1 |" in text and "- `nli`: `nli|x`" in text
    assert "seen: 100.0% rated ≥ 2.0 and 50.0% ≥ 2.5 (n=2)" in text


def test_an_unknown_run_is_refused():
    with pytest.raises(ValueError, match="unknown run"):
        rl.load_run("bleu")
    with pytest.raises(SystemExit):
        rl.main(["--runs", "nli,bleu"])
