"""``d2t-metrics explain`` (d2t_metrics.explain): one example's table, text and each metric's
verdict per fact, as plain text. Offline: the model-free metrics (PARENT, DAE's ``rule``
config, fact_accuracy's ``openie``) and a tiny random NLI model, on the bundled examples;
the layouts of the model-heavy metrics from their documented per-example fields."""

import argparse
import json
import os

import pytest

from d2t_metrics import explain

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples", "examples.jsonl")
MODEL_FREE = ["--config", "dae=rule", "--config", "fact_accuracy=openie"]


def parser():
    """The subcommand's parser as the command line builds it: a parent with the shared options, then ours."""
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--metrics-dir")
    common.add_argument("--checkpoints-dir")
    p = argparse.ArgumentParser(prog="d2t-metrics explain", parents=[common])
    return explain.add_arguments(p)


def run(capsys, *argv):
    code = explain.run(parser().parse_args(list(argv)))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def section(out, title):
    """The lines of one metric's section (from its heading to the next heading)."""
    lines = out.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith(title + ":"))
    end = next((i for i in range(start + 2, len(lines)) if lines[i] and not lines[i].startswith(" ") and lines[i + 1:i + 2]
                and set(lines[i + 1]) == {"-"}), len(lines))
    return "\n".join(lines[start:end])


@pytest.fixture(scope="module")
def examples():
    with open(EXAMPLES, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def test_a_line_of_the_examples_with_every_model_free_metric_and_a_tiny_nli(capsys, tiny_nli, examples):
    import evaluate

    code, out, err = run(capsys, "--input", EXAMPLES, "--line", "3", "--metrics", "parent,nli_semantic_accuracy,dae,fact_accuracy",
                         *MODEL_FREE, "--model", f"nli_semantic_accuracy={tiny_nli}", "--width", "100")
    assert code == 0, err
    row = examples[2]
    assert out.startswith(f"Example {row['id']} ({EXAMPLES}, line 3)")
    # The input: the table one triple per line, the text, the references.
    for triple in row["table"]:
        assert f"\n  {triple}\n" in out
    assert f"\n  {row['prediction']}\n" in out
    assert all(f"{i}. {r}" in out for i, r in enumerate(row["references"], 1))
    assert all(len(line) <= 100 for line in out.split("\n"))

    # PARENT: its numbers as compute gives them.
    direct = evaluate.load(os.path.join(ROOT, "metrics", "parent")).compute(
        predictions=[row["prediction"]], references=[row["references"]], tables=[row["table"]], per_example=True, show_progress=False)
    ex = direct["examples"][0]
    assert f"precision {ex['precision']:.4f}, recall {ex['recall']:.4f}, F1 {ex['f1']:.4f}" in section(out, "PARENT")
    # NLI: a verdict for each fact of the table, whatever the random model says.
    nli = section(out, "NLI semantic accuracy")
    for triple in row["table"]:
        assert sum(line.strip() in (f"entailed: {triple}", f"NOT entailed (omitted): {triple}") for line in nli.split("\n")) == 1, nli
    assert "hallucination check" in nli
    # DAE's rule: the words of the text the table does not hold are not entailed.
    dae = section(out, "DAE")
    assert "arcs not entailed" in dae and "Prizes -prep:in-> Stockholm  0.0000" in dae
    assert "born -prep:in-> Warsaw" not in dae  # entailed by the table: not listed
    # fact_accuracy: every extracted fact with its verdict and evidence; the table's facts stated or missing.
    facts = section(out, "Fact accuracy")
    assert "SUPPORTED: Marie Curie | birthPlace | Warsaw" in facts and "UNVERIFIABLE:" in facts
    assert "evidence: " in facts and "stated: Marie_Curie | birthPlace | Warsaw" in facts
    # The summary: one line per metric that ran.
    summary = out.split("\nScores\n")[1].split("\n\n")[0]
    assert [line.split("  ")[1].strip() for line in summary.split("\n")[1:] if not line.startswith("    ")] == [
        "PARENT", "NLI semantic accuracy", "DAE", "Fact accuracy"]


def test_by_id_and_given_directly(capsys):
    code, out, err = run(capsys, "--input", EXAMPLES, "--id", "webnlg-5", "--metrics", "dae", *MODEL_FREE[:2])
    assert code == 0, err
    assert out.startswith(f"Example webnlg-5 ({EXAMPLES}, line 5)")

    code, out, err = run(capsys, "--prediction", "Alan Bean was born in Boston.", "--table",
                         "Alan_Bean | birthPlace | Wheeler,_Texas\nAlan_Bean | occupation | Test_pilot",
                         "--metrics", "dae", *MODEL_FREE[:2], "--width", "60")
    assert code == 0, err
    assert "\n  Alan_Bean | birthPlace | Wheeler,_Texas\n  Alan_Bean | occupation | Test_pilot\n" in out
    assert "born -prep:in-> Boston  0.0000" in out
    assert all(len(line) <= 60 for line in out.split("\n"))


@pytest.mark.parametrize("argv,fragment", [
    (["--input", EXAMPLES, "--line", "99"], "has no example on line 99"),
    (["--input", EXAMPLES, "--line", "0"], "--line must be >= 1"),
    (["--input", EXAMPLES, "--id", "nope"], "has no example with id 'nope' (ids: webnlg-1, webnlg-2"),
    (["--input", EXAMPLES, "--prediction", "x"], "not both"),
    (["--table", "A | p | B"], "give --input FILE"),
    (["--prediction", "x", "--table", "A | p"], "the command line: table: malformed triple 'A | p'"),
    (["--input", "/no/such/file.jsonl"], "cannot read input file"),
    (["--input", EXAMPLES, "--metrics", "nope"], "nope"),
    (["--input", EXAMPLES, "--metrics", "parent", "--option", "parent.nope=1"], "parent has no option 'nope'"),
])
def test_bad_arguments_exit_2_before_any_model_loads(capsys, argv, fragment):
    code, out, err = run(capsys, *argv)
    assert code == 2 and out == "" and fragment in err, err
    assert "running" not in err


def test_a_bad_line_is_named(capsys, tmp_path):
    bad = tmp_path / "in.jsonl"
    bad.write_text('{"prediction": "x", "table": "A | p | B"}\n\n{"prediction": "y", "table": "A | p"}\n', encoding="utf-8")
    code, _, err = run(capsys, "--input", str(bad), "--line", "3", "--metrics", "dae", *MODEL_FREE[:2])
    assert code == 2 and f"{bad}, line 3: table: " in err and "malformed triple" in err
    code, _, err = run(capsys, "--input", str(bad), "--line", "2", "--metrics", "dae")
    assert code == 2 and "has no example on line 2 (its examples are on lines 1, 3)" in err


# ---------------------------------------------------------------------------
# Layouts from per-example dicts (the fields each card documents)

ROW = {"id": "x", "prediction": "Alan Bean was born in Boston.", "table": ["Alan_Bean | birthPlace | Wheeler,_Texas"]}


def _question(i, score, predicted=""):
    return {"question": f"Question {i}?", "answer": f"answer {i}", "candidate": i, "predicted": predicted,
            "answerability": 0.9, "f1": score, "bertscore": score, "score": score}


def test_data_questeval_failed_questions_first_and_capped():
    failed = [_question(i, 0.1) for i in range(13)]
    passed = [_question(100 + i, 0.9, f"answer {100 + i}") for i in range(3)]
    example = {"score": 0.4, "precision": 0.3, "recall": 0.5, "source": "table", "missing": ["Wheeler,_Texas"], "unsupported": ["Boston"],
               "sources": [{"source": "table", "from_source": failed[:7] + passed, "from_text": failed[7:]}]}
    out = explain.render(ROW, {"data_questeval": example}, limit=10, width=120)
    body = section(out, "Data-QuestEval")
    assert "13 of 16 questions failed" in out
    assert body.index("Questions that failed (13 of 16") < body.index("Question 0?") < body.index("Questions that passed (3 of 16")
    assert 'expected "answer 0", found no answer; score 0.1000' in body
    assert 'expected "answer 100", found "answer 100"; score 0.9000' in body
    assert "... 3 more questions" in body and "Question 12?" not in body and "Question 9?" in body
    assert "asked about the text, answered on the table:" in body
    assert "Table values the text does not give: Wheeler,_Texas" in body
    assert "Read as" not in body  # read as written: nothing to say
    shouted = explain.render(dict(ROW, prediction="ALAN BEAN WAS BORN IN BOSTON."),
                             {"data_questeval": dict(example, read_as="Alan Bean was born in boston.")}, limit=10, width=120)
    assert "Read as (one casing, the table's values as the table writes them): Alan Bean was born in boston." in shouted
    assert explain.render(ROW, {"data_questeval": dict(example, read_as=ROW["prediction"])}, limit=10, width=120) == out


def test_new_fields_and_unknown_metrics_are_shown():
    facts = {"score": 0.0, "recall": 0.0, "generated": [{"subject": "Alan Bean", "relation": "birthPlace", "object": "Boston"}],
             "contradicted": [{"subject": "Alan Bean", "relation": "birthPlace", "object": "Boston", "expected": ["Wheeler,_Texas"],
                               "evidence": "born in Boston", "evidence_start": 10, "evidence_end": 24, "grounded": False}],
             "supported": [], "unverifiable": [], "missing": [{"subject": "Alan_Bean", "relation": "birthPlace", "object": "Wheeler,_Texas"}],
             "ground_truth": [{"subject": "Alan_Bean", "relation": "birthPlace", "object": "Wheeler,_Texas"}],
             "ground_truth_source": "table", "truncated": True}
    other = {"score": 0.25, "label": "odd", "items": [{"word": f"w{i}", "p": 0.5} for i in range(4)]}
    out = explain.render(ROW, {"fact_accuracy": facts, "my_metric": other}, limit=2, width=100)
    body = section(out, "Fact accuracy")
    assert "CONTRADICTED: Alan Bean | birthPlace | Boston" in body and "expected: Wheeler,_Texas" in body
    assert 'evidence: "born in Boston"' in body and "grounded: no" in body and "evidence span: characters 10-24" in body
    assert "MISSING: Alan_Bean | birthPlace | Wheeler,_Texas" in body
    assert "note: truncated: yes" in body
    mine = section(out, "my_metric")
    assert "score 0.2500; label odd" in mine and "items (4):" in mine and "word w0; p 0.5000" in mine and "... 2 more" in mine


def test_dae_and_nli_layouts():
    dae = {"score": 0.5, "min_score": 0.1, "ok": False, "not_entailed": 1, "num_arcs": 2, "no_arcs": False, "arcs": [
        {"head": "born", "relation": "prep:in", "child": "Boston", "head_index": 3, "child_index": 5, "probability": 0.1},
        {"head": "born", "relation": "nsubjpass", "child": "Bean", "head_index": 3, "child_index": 1, "probability": 0.9}]}
    nli = {"score": 0.01, "confidence": 0.01, "label": "omission", "ok": False, "omission": True, "hallucination": False,
           "omitted_facts": [{"fact": ROW["table"][0], "sentence": "Alan Bean was born in Wheeler, Texas.",
                              "probabilities": {"contradiction": 0.9, "neutral": 0.09, "entailment": 0.01}}],
           "checks": [{"type": "omission", "hypothesis": "Alan Bean was born in Wheeler, Texas.", "entailed": False,
                       "probabilities": {"contradiction": 0.9, "neutral": 0.09, "entailment": 0.01}},
                      {"type": "hallucination", "hypothesis": ROW["prediction"], "entailed": True,
                       "probabilities": {"contradiction": 0.01, "neutral": 0.01, "entailment": 0.98}}]}
    out = explain.render(ROW, {"dae": dae, "nli_semantic_accuracy": nli}, width=100)
    assert "1 of 2 arcs not entailed" in out and "born -prep:in-> Boston  0.1000" in out and "-> Bean" not in out
    body = section(out, "NLI semantic accuracy")
    assert f"NOT entailed (omitted): {ROW['table'][0]}" in body and '"Alan Bean was born in Wheeler, Texas." (C 0.900' in body
    assert "hallucination check)? yes" in body
    # DAE read both ways: the two scores, the label and each fact, the ones left out first
    both = dict(dae, text_score=0.5, source_score=0.2, label="omission+hallucination",
                omitted_facts=[{"fact": ROW["table"][0], "sentence": "s", "score": 0.2}],
                facts=[{"fact": "x | y | z", "sentence": "t", "score": 0.9, "covered": True, "arcs": []},
                       {"fact": ROW["table"][0], "sentence": "s", "score": 0.2, "covered": False, "arcs": []}])
    body = section(explain.render(ROW, {"dae": both}, width=120), "DAE")
    assert "the lower of the text's arcs 0.5000 and the source's arcs against the text 0.2000" in body
    assert "omission+hallucination: 1 of 2 arcs not entailed; 1 of 2 facts left out" in body
    assert body.index(f"{ROW['table'][0]}  0.2000  LEFT OUT or changed") < body.index("x | y | z  0.9000  said")


def test_the_width_follows_the_terminal(monkeypatch):
    import shutil

    monkeypatch.setattr(shutil, "get_terminal_size", lambda fallback=(80, 24): os.terminal_size((57, 24)))
    assert explain.output_width(None) == 57 and explain.output_width(120) == 120
    monkeypatch.setattr(shutil, "get_terminal_size", lambda fallback=(80, 24): os.terminal_size((10, 24)))
    assert explain.output_width(None) == explain.MIN_WIDTH
