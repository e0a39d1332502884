"""The meta-evaluation harness: statistics, baselines, data loaders, and a smoke run."""

import json
import os
import random

import numpy as np
import pytest

from benchmarks import stats
from benchmarks.adapters import Scores
from conftest import ROOT


# ------------------------------------------------------------------ stats


def test_binary_agreement_counts_not_ok_class():
    pred = [True, False, False, True, False]
    gold = [True, False, True, False, False]
    r = stats.binary_agreement(pred, gold)
    assert r["accuracy"] == pytest.approx(3 / 5)
    # not-OK predicted at 1, 2, 4; gold not-OK at 1, 3, 4: two hits of three each way.
    assert r["precision_not_ok"] == pytest.approx(2 / 3)
    assert r["recall_not_ok"] == pytest.approx(2 / 3)
    assert r["f1_not_ok"] == pytest.approx(2 / 3)
    assert r["majority_accuracy"] == pytest.approx(3 / 5)


def test_auc_and_oracle_threshold():
    scores = [0.1, 0.2, 0.3, 0.8, 0.9, 0.4]
    gold = [False, False, False, True, True, True]
    assert stats.auc_not_ok(scores, gold) == pytest.approx(1.0)
    best = stats.best_threshold_agreement(scores, gold)
    assert best["accuracy"] == 1.0 and 0.3 < best["threshold"] <= 0.4
    # Reversed scores: AUC 0, and the best a threshold can do is the majority.
    assert stats.auc_not_ok([-s for s in scores], gold) == pytest.approx(0.0)
    # Ties count half.
    assert stats.auc_not_ok([0.5, 0.5], [True, False]) == pytest.approx(0.5)


def test_reranking_reports_and_breaks_ties():
    r = stats.reranking([1.0, 0.5, 0.3, 0.7], [0.5, 0.5, 0.9, 0.7], seed=0)
    assert (r["wins"], r["ties"], r["losses"], r["n"]) == (1, 2, 1, 4)
    assert r["accuracy_ties_half"] == pytest.approx(0.5)
    assert r["accuracy"] in (0.25, 0.5, 0.75)
    assert r == stats.reranking([1.0, 0.5, 0.3, 0.7], [0.5, 0.5, 0.9, 0.7], seed=0)  # deterministic


def test_correlations_and_bootstrap_ci_cover_point():
    rng = np.random.default_rng(1)
    x = rng.normal(size=200)
    y = x + rng.normal(size=200)
    groups = np.repeat(np.arange(50), 4)
    r = stats.bootstrap_correlations(x, y, groups, n_resamples=200, seed=0)
    for name in stats.CORRELATIONS:
        assert r[name]["low"] < r[name]["value"] < r[name]["high"]
    assert 0.5 < r["pearson"]["value"] < 0.9
    assert stats.correlations([1, 2, 3], [1, 1, 1])["pearson"] != stats.correlations([1, 2, 3], [1, 1, 1])["pearson"]  # NaN


def _reference_style_system_pearson(per_input, human, n_boot, seed):
    """The loop of Dhingra et al.'s webnlg_correlations.py, written out naively."""
    from scipy.stats import pearsonr

    rnd = random.Random(seed)
    keys = list(range(len(per_input)))
    systems = range(len(per_input[0]))
    out = []
    for _ in range(n_boot):
        sample = [rnd.choice(keys) for _ in range(len(per_input))]
        m = [np.mean([per_input[i][s] for i in sample]) for s in systems]
        h = [sum(human[i][s] for i in sample) / len(sample) for s in systems]
        out.append(pearsonr(m, h)[0])
    return float(np.mean(out))


def test_system_level_bootstrap_matches_reference_loop():
    rng = np.random.default_rng(3)
    human = rng.uniform(1, 3, size=(30, 6))
    metric = human + rng.normal(scale=0.8, size=(30, 6))
    ours = stats.system_level_bootstrap(metric, human, n_resamples=50, seed=7)
    assert ours["value"] == pytest.approx(_reference_style_system_pearson(metric.tolist(), human.tolist(), 50, 7), abs=1e-12)
    assert ours["low"] <= ours["value"] <= ours["high"]
    same = stats.system_level_bootstrap(human, human, n_resamples=20, seed=0)
    assert same["value"] == pytest.approx(1.0)


# -------------------------------------------------------------- baselines


def test_bleu_corpus_from_stats_is_sacrebleu_corpus_bleu():
    from sacrebleu.metrics import BLEU

    from benchmarks.baselines import SentenceBLEU

    hyps = ["the cat sat on the mat", "a dog barked loudly at night", "hello there"]
    refs = [["the cat is on the mat"], ["a dog barked at night", "the dog barked"], ["hello there friend"]]
    bleu = SentenceBLEU()
    out = bleu.score(hyps, refs)
    assert out[0]["score"] == pytest.approx(BLEU(effective_order=True).sentence_score(hyps[0], refs[0]).score)
    summed = np.sum([o["stats"] for o in out], axis=0)
    # sacrebleu wants one stream per reference position; pad missing ones.
    streams = [[r[k] if k < len(r) else None for r in refs] for k in range(2)]
    expected = BLEU().corpus_score(hyps, streams).score
    assert float(bleu.corpus_from_stats(summed[None], 3)[0]) == pytest.approx(expected)
    assert "eff:yes" in bleu.signature and "nrefs:var" in bleu.signature


def test_bertscore_properties(tiny_encoder):
    from benchmarks.baselines import BERTScore

    bs = BERTScore(model=tiny_encoder)
    a, b = "the cat sat on the mat", "a dog barked at night"
    same, empty, multi = bs.score([a, "", a], [[a], [a], [b, a]])
    assert same["f1"] == pytest.approx(1.0, abs=1e-5)
    assert empty["f1"] == 0.0
    assert multi["f1"] == pytest.approx(1.0, abs=1e-5)  # max over references
    ab, ba = bs.score([a, b], [[b], [a]])
    assert ab["precision"] == pytest.approx(ba["recall"], abs=1e-6)
    assert ab["f1"] < 0.999
    assert "idf:no" in bs.signature and f"layer:{bs.layer}" in bs.signature


# ------------------------------------------------------------------- data


def test_loaders_match_the_data_readme(shared):
    from benchmarks.data import load_dataset

    web = load_dataset("webnlg")
    assert (len(web), web.n_inputs, len(web.systems)) == (2230, 223, 10)
    assert all(it.references and it.table for it in web.items)
    e2e = load_dataset("e2e")
    assert (len(e2e), e2e.n_inputs, len(e2e.systems)) == (13230, 630, 21)
    assert sum(it.human["ok"] for it in e2e.items) == 8625
    assert {it.human["label"] for it in e2e.items} == {"OK", "omission", "hallucination", "hallucination+omission"}
    assert not any(it.prediction.startswith("'") and it.prediction.endswith("'") for it in e2e.items if it.system.startswith("tnt"))
    # The same inputs, in the same order, as the golden PARENT files.
    import gzip

    with gzip.open(os.path.join(shared, "golden", "parent_e2e.jsonl.gz"), "rt", encoding="utf-8") as f:
        golden = [json.loads(line) for line in f]
    assert [(g["prediction"], g["references"], g["mr"]) for g in golden] == [(it.prediction, it.references, it.table) for it in e2e.items]
    with open(os.path.join(shared, "golden", "parent_webnlg2017.jsonl"), encoding="utf-8") as f:
        golden = [json.loads(line) for line in f]
    assert [(g["prediction"], g["references"], g["mr"]) for g in golden] == [(it.prediction, it.references, it.table) for it in web.items]
    pairs = load_dataset("dae_pairs")
    assert (len(pairs), pairs.n_inputs) == (746, 373)
    for name in ("webnlg", "e2e", "dae_pairs"):
        assert 0 < len(load_dataset(name, smoke=True)) <= 50


# ----------------------------------------------- golden PARENT correlations


def test_golden_parent_scores_reproduce_published_correlations(shared):
    """Our correlation code on the reference implementation's PARENT scores gives
    the figures in shared/golden/README.md: segment Pearson 0.609, Spearman 0.617,
    system-level Pearson 0.877 (a bootstrap mean: +-0.002 Monte-Carlo noise)."""
    from benchmarks.data import load_dataset
    from benchmarks.meta import analyze_webnlg

    web = load_dataset("webnlg")
    with open(os.path.join(shared, "golden", "parent_webnlg2017.jsonl"), encoding="utf-8") as f:
        golden = [json.loads(line) for line in f]
    assert [g["team"] for g in golden] == [it.system for it in web.items]
    scores = Scores(scores=np.array([g["lambda_none"]["f1"] for g in golden]))
    m = analyze_webnlg(web, scores, uses_references=True, n_boot=50, n_sys_boot=500, seed=0)
    assert m["n_systems_outputs"] == 2007
    seg = m["segment"]["semantics"]
    assert round(seg["pearson"]["value"], 3) == 0.609
    assert round(seg["spearman"]["value"], 3) == 0.617
    system = m["system"]["semantics"]["pearson"]
    assert system["n_systems"] == 9 and system["n_inputs"] == 223
    assert system["value"] == pytest.approx(0.877, abs=0.002)


# -------------------------------------------------------------- smoke run


def test_smoke_run_writes_sane_results(shared, tiny_encoder, tmp_path):
    from benchmarks import run
    from benchmarks.results_md import write_section

    real_results = os.path.join(ROOT, "benchmarks", "RESULTS.md")
    before = open(real_results, encoding="utf-8").read() if os.path.exists(real_results) else None
    out = str(tmp_path)
    write_section("parent_speed", "## PARENT speed\n\nkept", path=os.path.join(out, "RESULTS.md"))

    dumps = os.path.join(out, "dumps")
    rc = run.main(["--smoke", "--metrics", "bleu,bertscore,parent", "--out", out, "--model", f"bertscore={tiny_encoder}", "--bootstrap", "100", "--system-bootstrap", "100",
                   "--dump-examples", dumps])
    assert rc == 0

    text = open(os.path.join(out, "RESULTS.md"), encoding="utf-8").read()
    assert "kept" in text  # another script's section survives
    for section in ("meta_setup", "meta_webnlg_segment", "meta_webnlg_system", "meta_webnlg_binary", "meta_e2e", "meta_dae_pairs", "meta_speed"):
        assert f"<!-- BEGIN {section} -->" in text
    for png in ("webnlg_scatter.png", "webnlg_correlations.png", "speed.png"):
        path = os.path.join(out, "plots", png)
        assert 1000 < os.path.getsize(path) < 200_000

    bleu = json.load(open(os.path.join(out, "meta_eval", "bleu.json")))
    web = bleu["datasets"]["webnlg"]
    assert web["smoke"] and web["n"] <= 50
    seg = web["measures"]["segment"]["semantics"]
    assert 0.2 < seg["pearson"]["value"] <= 1.0  # BLEU tracks semantics on these 45 outputs
    assert seg["pearson"]["low"] <= seg["pearson"]["value"] <= seg["pearson"]["high"]
    assert -1 <= web["measures"]["system"]["semantics"]["pearson"]["value"] <= 1
    assert web["speed"]["seconds"] > 0 and web["n"] / web["speed"]["seconds"] > 50
    rerank = bleu["datasets"]["dae_pairs"]["measures"]["rerank"]
    assert rerank["n"] == 25 and 0 <= rerank["accuracy"] <= 1
    e2e = bleu["datasets"]["e2e"]["measures"]["binary"]["2way"]["threshold"]
    assert 0.5 <= e2e["accuracy"] <= 1 and 0 <= e2e["auc"] <= 1
    assert bleu["datasets"]["webnlg"]["signature"] in text.replace("\\|", "|")

    bert = json.load(open(os.path.join(out, "meta_eval", "bertscore.json")))
    assert set(bert["datasets"]) == {"webnlg", "e2e", "dae_pairs"}
    assert all(-1 <= v <= 1.0001 for v in bert["datasets"]["webnlg"]["measures"]["scatter"]["score"])

    if os.path.isfile(os.path.join(ROOT, "metrics", "parent", "parent.py")):
        parent = json.load(open(os.path.join(out, "meta_eval", "parent.json")))
        seg = parent["datasets"]["webnlg"]["measures"]["segment"]["semantics"]["pearson"]["value"]
        assert 0.2 < seg <= 1.0
        # --dump-examples: one line per item with the metric's own per-example output.
        with open(os.path.join(dumps, "parent.webnlg.jsonl"), encoding="utf-8") as f:
            rows = [json.loads(line) for line in f]
        assert len(rows) == parent["datasets"]["webnlg"]["n"]
        assert all(r["score"] == pytest.approx(r["example"]["score"]) and "semantics" in r["human"] for r in rows)
        assert {r["system"] for r in rows} > {"webnlg"}
    else:
        assert "metrics/parent/parent.py does not exist yet" in text

    # Rerunning one metric on one data set keeps everything else.
    assert run.main(["--smoke", "--metrics", "bleu", "--datasets", "dae_pairs", "--out", out, "--no-plots", "--no-tracemalloc"]) == 0
    again = json.load(open(os.path.join(out, "meta_eval", "bertscore.json")))
    assert again == bert
    assert "`bertscore`" in open(os.path.join(out, "RESULTS.md"), encoding="utf-8").read()

    after = open(real_results, encoding="utf-8").read() if os.path.exists(real_results) else None
    assert after == before  # the smoke run never touches benchmarks/RESULTS.md


def test_missing_metric_is_skipped_with_a_message(shared, tmp_path, monkeypatch, capsys):
    from benchmarks import adapters, run

    spec = adapters.MetricSpec(
        "not_written_yet", "a metric whose module does not exist",
        lambda o: adapters.ModuleScorer("not_written_yet", "not_written_yet", o), ("dae_pairs",),
    )
    monkeypatch.setitem(adapters.METRICS, "not_written_yet", spec)
    monkeypatch.setattr(run, "METRICS", adapters.METRICS)
    out = str(tmp_path)
    rc = run.main(["--smoke", "--metrics", "not_written_yet,bleu", "--datasets", "dae_pairs", "--out", out, "--no-plots"])
    assert rc == 0
    assert "SKIP metric not_written_yet: metrics/not_written_yet/not_written_yet.py does not exist yet" in capsys.readouterr().out
    text = open(os.path.join(out, "RESULTS.md"), encoding="utf-8").read()
    assert "not run yet: metrics/not_written_yet/not_written_yet.py does not exist yet" in text
    assert os.listdir(os.path.join(out, "meta_eval")) == ["bleu.json"]
    # Rendering alone reproduces the same file.
    assert run.main(["--render-only", "--out", out, "--no-plots"]) == 0
    assert "`bleu` | 25 |" in open(os.path.join(out, "RESULTS.md"), encoding="utf-8").read()


def test_fact_accuracy_is_correlated_as_an_f1_of_accuracy_and_recall():
    from benchmarks.adapters import METRICS, accuracy_recall_f1

    assert accuracy_recall_f1({"score": 1.0, "recall": 0.5}) == pytest.approx(2 / 3)
    assert accuracy_recall_f1({"score": None, "recall": 0.5}) == 0.0  # nothing checkable supports nothing
    assert accuracy_recall_f1({"score": 0.0, "recall": 0.0}) == 0.0
    for name in ("fact_accuracy", "fact_accuracy_openie", "fact_accuracy_relations", "fact_accuracy_ref"):
        assert METRICS[name].datasets == ("webnlg",)


def test_has_checkpoint_finds_weights_in_sub_folders(tmp_path, monkeypatch):
    from benchmarks import adapters

    monkeypatch.setattr(adapters, "CHECKPOINTS_DIR", str(tmp_path))
    (tmp_path / "flat").mkdir()
    (tmp_path / "flat" / "adapter_model.safetensors").write_bytes(b"x")
    (tmp_path / "nested" / "text_qa").mkdir(parents=True)
    (tmp_path / "nested" / "text_qa" / "model.safetensors").write_bytes(b"x")
    (tmp_path / "placeholder").mkdir()
    (tmp_path / "placeholder" / "README.md").write_text("to be trained")
    assert adapters.has_checkpoint("flat") and adapters.has_checkpoint("nested")
    assert not adapters.has_checkpoint("placeholder") and not adapters.has_checkpoint("absent")


def test_fact_accuracy_e2e_compares_explanations_with_the_slot_error_script():
    from benchmarks import fact_accuracy_e2e as e2e

    def example(contradicted=0, unverifiable=0, missing=0):
        return {"contradicted": [{}] * contradicted, "unverifiable": [{}] * unverifiable, "missing": [{}] * missing}

    def row(valerr=0, added=0, missing=0):
        ok = "1" if not (valerr or added or missing) else "0"
        return {"valerr": str(valerr), "added": str(added), "missing": str(missing), "slot_error_ok": ok}

    examples = [example(), example(contradicted=1), example(unverifiable=2), example(missing=1), example(missing=3)]
    rows = [row(), row(valerr=1), row(), row(missing=1), row(missing=2, added=1)]
    m = e2e.compare(examples, rows)
    assert m["contradicted"]["precision"] == 1.0 and m["contradicted"]["recall"] == 1.0
    # The one output flagged unverifiable is clean by the script; the script's added slot was not flagged.
    assert m["unverifiable"]["flagged"] == 1 and m["unverifiable"]["precision"] == 0.0 and m["unverifiable"]["recall"] == 0.0
    assert m["missing"]["f1"] == 1.0 and m["missing"]["auc"] == 1.0
    # The first output is clean for both; the third is flagged only by the metric.
    assert m["ok"]["accuracy"] == pytest.approx(4 / 5) and m["ok"]["recall_not_ok"] == 1.0
    none = e2e.flag_agreement([False, False], [True, False])
    assert none["precision"] != none["precision"] and none["recall"] == 0.0 and none["f1"] == 0.0  # NaN: nothing flagged
    rows_all = [{"i": str(i)} for i in range(10)]
    drawn = e2e.sample_rows(rows_all, 4, seed=1)
    assert len(drawn) == 4 and drawn == e2e.sample_rows(rows_all, 4, seed=1)
    assert [r["i"] for r in drawn] == sorted((r["i"] for r in drawn), key=int)  # file order kept
    assert e2e.sample_rows(rows_all, 0, seed=1) == rows_all


def test_the_recorded_commit_says_when_the_measured_code_differs_from_it(tmp_path, monkeypatch):
    import shutil
    import subprocess

    from benchmarks import run

    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    (repo / "benchmarks").mkdir(parents=True)
    (repo / "code.py").write_text("x = 1\n")
    (repo / "benchmarks" / "RESULTS.md").write_text("old\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git[:3] + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "."], check=True)
    subprocess.run(git + ["commit", "-qm", "first"], check=True)
    monkeypatch.setattr(run, "ROOT", str(repo))
    clean = run._git_commit()
    assert clean and "+" not in clean
    (repo / "benchmarks" / "RESULTS.md").write_text("new results\n")  # what a run writes
    assert run._git_commit() == clean
    (repo / "code.py").write_text("x = 2\n")
    assert run._git_commit() == clean + "+changes"


def _write_scores(path, rows):
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(row) + "\n" for row in rows)
    return str(path)


def test_same_scores_finds_a_moved_number_and_nothing_else(tmp_path):
    from benchmarks import same_scores

    rows = [{"id": "a", "parent": {"score": 0.5, "precision": 0.25, "label": "x"}, "dae": {"score": 1.0, "arcs": [{"p": 0.9}]}},
            {"id": "b", "parent": {"score": 0.125, "precision": 0.5, "label": "y"}, "dae": {"score": 0.0, "arcs": []}}]
    before = _write_scores(tmp_path / "before.jsonl", rows)
    same = same_scores.compare(before, _write_scores(tmp_path / "same.jsonl", rows))
    assert same == {"dae": {"examples": 2, "differ": 0, "largest": 0.0}, "parent": {"examples": 2, "differ": 0, "largest": 0.0}}
    moved = json.loads(json.dumps(rows))
    moved[0]["dae"]["arcs"][0]["p"] = 0.9 + 1e-9
    moved[1]["parent"]["label"] = "z"  # a changed explanation counts, though no number moved
    report = same_scores.compare(before, _write_scores(tmp_path / "moved.jsonl", moved))
    assert report["dae"]["differ"] == 1 and 0 < report["dae"]["largest"] < 1e-8
    assert report["parent"] == {"examples": 2, "differ": 1, "largest": 0.0}
    assert same_scores.main(["compare", before, str(tmp_path / "moved.jsonl")]) == 1
    with pytest.raises(ValueError, match="same examples"):
        same_scores.compare(before, _write_scores(tmp_path / "short.jsonl", rows[:1]))


def test_dae_e2e_auc_interval_covers_its_point_and_the_section_renders():
    from benchmarks import dae_e2e

    rng = np.random.default_rng(0)
    gold_ok = np.arange(200) >= 20  # 20 outputs with an added or wrong slot
    scores = np.where(gold_ok, 0.7, 0.4) + 0.3 * rng.normal(size=200)
    auc = dae_e2e.auc_interval(scores, gold_ok, n_boot=200)
    assert auc["value"] == pytest.approx(stats.auc_not_ok(scores, gold_ok))
    assert auc["low"] < auc["value"] < auc["high"] and auc["value"] > 0.7
    assert dae_e2e.auc_interval(-scores, gold_ok, n_boot=50)["value"] < 0.3  # a reversed score reads low
    record = {"n": 200, "seed": 0, "positives (added or wrong-value slot)": 20, "auc": {"dae": auc},
              "seconds": {"dae": 1.0}, "signatures": {"dae": "dae|x"}, "command": "python -m benchmarks.dae_e2e", "date": "d"}
    text = dae_e2e.render(record)
    assert text.startswith("## DAE on E2E slot errors") and f"{auc['value']:.3f} [{auc['low']:.3f}" in text


def test_dae_e2e_omissions_per_fact_against_the_slot_error_script():
    """benchmarks.dae_e2e: DAE's per-fact verdicts and NLI's omission checks are scored against the
    script's per-slot verdict (missing or a wrong value counts as omitted); a fact DAE could not judge
    (no arc) is not flagged."""
    from benchmarks import dae_e2e

    diff = '{"eat_type": {"pub": 0}, "area": {"riverside": -1}, "food": {"Italian": -1, "French": 1}}'
    rows = [{"diff": diff}]
    facts = ["The Eagle | eatType | pub", "The Eagle | area | riverside", "The Eagle | food | Italian"]
    dae = {"facts": [{"fact": facts[0], "covered": True}, {"fact": facts[1], "covered": None},
                     {"fact": facts[2], "covered": False}]}
    m = dae_e2e.omission_per_fact([dae], rows)
    # gold: area missing, food a wrong value; flagged: food only
    assert (m["n"], m["gold"], m["flagged"]) == (3, 2, 1)
    assert m["precision"] == 1.0 and m["recall"] == 0.5
    assert m["recall_missing"] == 0.0 and m["recall_wrong_value"] == 1.0
    nli = {"checks": [{"type": "omission", "fact": f, "entailed": ok} for f, ok in zip(facts, (True, False, False))]
           + [{"type": "hallucination", "entailed": True}], "facts": ["The Eagle is a pub."]}  # NLI's facts are sentences
    assert dae_e2e.omission_per_fact([nli], rows)["recall"] == 1.0
    assert dae_e2e.omission_per_fact([{"score": 0.5}], rows) is None  # a scorer without per-fact verdicts
    record = {"n": 1, "seed": 0, "positives (added or wrong-value slot)": 1, "auc": {"dae": {"value": 0.5, "low": 0.4, "high": 0.6}},
              "seconds": {"dae": 1.0}, "omission_per_fact": {"dae": m}, "command": "c", "date": "d"}
    assert "| dae | 1 / 2 of 3 | 100.0 | 50.0 |" in dae_e2e.render(record)


GPU_SCRIPTS = sorted(f for f in os.listdir(os.path.join(ROOT, "benchmarks", "gpu")) if f.endswith(".sh"))


@pytest.mark.parametrize("script", GPU_SCRIPTS)
def test_the_gpu_session_scripts_parse_and_are_in_its_readme(script):
    """A lent GPU's minutes are too few to find a typo in them (benchmarks/gpu/README.md)."""
    import subprocess

    path = os.path.join(ROOT, "benchmarks", "gpu", script)
    checked = subprocess.run(["bash", "-n", path], capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr
    with open(os.path.join(ROOT, "benchmarks", "gpu", "README.md"), encoding="utf-8") as f:
        assert script in f.read()


def test_dae_rerank_pairs_and_their_paired_difference():
    """benchmarks.dae_rerank: a pair is right when the correct text scores higher, a tie by a seeded coin;
    two checkpoints compare on the same pairs (exact McNemar on the discordant ones, bootstrap interval)."""
    from benchmarks.dae_rerank import pair_outcomes, paired_difference, pairwise_accuracy

    examples = [{"score": s} for s in (0.9, 0.2, 0.5, 0.4, 0.7, 0.5)]  # pairs (0.9, 0.4), (0.2, 0.7), (0.5, 0.5)
    right, tied = pair_outcomes(examples, 3, seed=0)
    assert right[:2] == [True, False] and tied == [False, False, True]
    assert pair_outcomes(examples, 3, seed=0) == (right, tied)  # the coin is seeded
    accuracy, strict, ties = pairwise_accuracy(examples, 3, seed=0)
    assert accuracy == pytest.approx(100 * sum(right) / 3) and strict == pytest.approx(100 / 3) and ties == 1

    first = [True] * 10 + [False] * 10
    d = paired_difference(first, [True] * 20, resamples=500, seed=1)  # the second gets 10 more right
    assert d["difference"] == pytest.approx(50.0) and d["only_first"] == 0 and d["only_second"] == 10
    assert d["mcnemar_p"] == pytest.approx(2 / 2 ** 10) and d["low"] <= 50.0 <= d["high"] and d["low"] > 0
    same = paired_difference(first, first, resamples=200)
    assert same["difference"] == 0 and same["mcnemar_p"] == 1.0 and same["low"] == same["high"] == 0


def test_decode_profile_summarises_the_profiler():
    """benchmarks.decode_profile (the next GPU session's probe, issue #35): the device's share of the wall
    time and the top operators, read from a profiler's averages."""
    from types import SimpleNamespace

    from benchmarks.decode_profile import device_busy, operator_rows

    events = [SimpleNamespace(key="aten::linear", count=10, self_cpu_time_total=5000, self_device_time_total=40000),
              SimpleNamespace(key="aten::scaled_dot_product_attention", count=30, self_cpu_time_total=90000,
                              self_device_time_total=1000),
              SimpleNamespace(key="aten::copy_", count=3, self_cpu_time_total=100, self_device_time_total=0)]
    by_cpu = operator_rows(events, "self_cpu_time_total", 2)
    assert [r["name"] for r in by_cpu] == ["aten::scaled_dot_product_attention", "aten::linear"]
    assert by_cpu[0] == {"name": "aten::scaled_dot_product_attention", "calls": 30, "self_cpu_ms": 90.0, "self_device_ms": 1.0}
    assert operator_rows(events, "self_device_time_total", 1)[0]["name"] == "aten::linear"
    assert device_busy(41000, 0.5) == pytest.approx(0.082) and device_busy(1, 0) == 0.0


def test_decode_profile_runs_on_one_output(shared, tmp_path):
    """The probe the next GPU session runs first (benchmarks/gpu/decode_probe.sh) runs end to end here, on the
    CPU, with the project's fact_accuracy checkpoint: its record counts the decoder's steps."""
    pytest.importorskip("torch")
    if not os.path.isdir(os.path.join(ROOT, "checkpoints", "fact_accuracy")):
        pytest.skip("checkpoints/fact_accuracy is not in this checkout")
    from benchmarks.decode_profile import main

    assert main(["--metric", "fact_accuracy", "--webnlg", "1", "--warm", "1", "--attn", "eager", "--out", str(tmp_path)]) == 0
    record = json.load(open(tmp_path / "decode_profile_fact_accuracy_eager.json", encoding="utf-8"))
    assert record["outputs"] == 1 and record["decoder_steps"] > 1 and record["ms_per_step"] > 0
    assert record["device"] == "cpu" and record["device_busy"] == 0.0 and record["top_by_cpu"]
    assert (tmp_path / "decode_profile_fact_accuracy_eager_cpu.txt").read_text(encoding="utf-8").strip()
