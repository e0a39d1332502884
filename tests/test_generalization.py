"""benchmarks.generalization: the category split, leave-one-category-out fitting
(no fold may see its held-out category) and the out-of-fold thresholds."""

import json
import os

import numpy as np
import pytest

from benchmarks import generalization as gen
from benchmarks import stats


# ---------------------------------------------------------------- the split


def test_unseen_categories_are_the_test_categories_missing_from_training():
    train = ["Airport", "Food", "City"]
    test = ["Food", "Artist", "Airport", "Politician", "Artist"]
    assert gen.unseen_categories(train, test) == ["Artist", "Politician"]


def test_training_categories_read_file_names_and_attributes(tmp_path):
    folder = tmp_path / "xml" / "train" / "1triples"
    folder.mkdir(parents=True)
    (folder / "Airport.xml").write_text('<entry category="Airport" eid="1"/><entry category="Astronaut" eid="2"/>')
    (folder / "Food.xml").write_text('<entry category="Food" eid="1"/>')
    assert gen.training_categories(str(tmp_path / "xml")) == ["Airport", "Astronaut", "Food"]
    with pytest.raises(FileNotFoundError):
        gen.training_categories(str(tmp_path / "nothing"))


def test_unseen_mask():
    mask = gen.unseen_mask(["A", "B", "C", "B"], ["B"])
    assert mask.tolist() == [False, True, False, True]


# ---------------------------------------------------------------- folds


def test_folds_never_train_on_their_held_out_group():
    groups = np.array(list("abcabcaab"))
    seen_tests = []
    for held, train, test in gen.leave_one_group_out(groups):
        assert held not in set(groups[train])
        assert set(groups[test]) == {held}
        assert len(train) + len(test) == len(groups)
        seen_tests.extend(test.tolist())
    assert sorted(seen_tests) == list(range(len(groups)))  # every row held out exactly once


def _memorizer():
    """A model that remembers every training row's target by its id (column 0):
    perfect in sample, so any leakage of a row into its own fold's training shows."""

    def fit(X, y):
        return {"table": dict(zip(X[:, 0].tolist(), y.tolist())), "mean": float(np.mean(y))}

    def predict(model, X):
        return np.array([model["table"].get(i, model["mean"]) for i in X[:, 0].tolist()])

    return fit, predict


def test_out_of_fold_predictions_come_only_from_other_groups():
    rng = np.random.default_rng(1)
    groups = np.repeat(np.arange(5), 20)
    y = rng.normal(size=100) + groups  # groups differ in level
    X = np.arange(100, dtype=float)[:, None]  # a unique id per row
    fit, predict = _memorizer()
    assert np.allclose(predict(fit(X, y), X), y)  # in sample it is perfect ...
    oof = gen.out_of_fold(X, y, groups, fit, predict)
    for g in range(5):
        # ... out of fold it only knows the other groups' mean.
        assert np.allclose(oof[groups == g], y[groups != g].mean())
    assert not np.any(np.isclose(oof, y))


def test_out_of_fold_fit_is_given_no_row_of_the_held_out_group():
    groups = np.repeat(np.array(["x", "y", "z"]), 4)
    X = np.column_stack([np.arange(12.0), np.repeat([0.0, 1.0, 2.0], 4)])  # column 1 encodes the group
    trained_on = []

    def fit(X_train, y_train):
        trained_on.append(set(X_train[:, 1].tolist()))
        return None

    def predict(model, X_test):
        held = set(X_test[:, 1].tolist())
        assert not held & trained_on[-1]
        return np.zeros(len(X_test))

    gen.out_of_fold(X, np.zeros(12), groups, fit, predict)
    assert trained_on == [{1.0, 2.0}, {0.0, 2.0}, {0.0, 1.0}]


def test_ridge_out_of_fold_cannot_learn_group_levels_that_in_sample_fitting_would():
    # The target is each group's own level; the features say which group a row is in.
    # Fitted in sample the ridge reproduces the levels; fitted on the other groups it
    # cannot know an unseen group's level, so out-of-fold correlation collapses.
    rng = np.random.default_rng(0)
    n_groups, per = 8, 30
    groups = np.repeat(np.arange(n_groups), per)
    levels = rng.normal(size=n_groups)
    y = levels[groups] + 0.05 * rng.normal(size=len(groups))
    X = np.eye(n_groups)[groups] + 0.01 * rng.normal(size=(len(groups), n_groups))
    in_sample = gen.predict_ridge(gen.fit_ridge(X, y, alpha=1e-3), X)
    oof = gen.out_of_fold(X, y, groups, lambda a, b: gen.fit_ridge(a, b, alpha=1e-3), gen.predict_ridge)
    assert np.corrcoef(in_sample, y)[0, 1] > 0.95
    assert abs(np.corrcoef(oof, y)[0, 1]) < 0.5


def test_fit_then_predict_fits_on_the_mask_and_predicts_the_rest():
    X = np.arange(10, dtype=float)[:, None]
    y = X[:, 0] * 2.0
    train = np.arange(10) < 6
    fit, predict = _memorizer()
    out = gen.fit_then_predict(X, y, train, fit, predict)
    assert np.isnan(out[train]).all()
    assert np.allclose(out[~train], y[train].mean())


# ---------------------------------------------------------------- models


def test_ridge_recovers_a_linear_relation():
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 3)) * [1.0, 5.0, 0.1]
    y = 2 * X[:, 0] - X[:, 1] + 10 * X[:, 2] + 3
    model = gen.fit_ridge(X, y, alpha=1e-8)
    assert np.allclose(gen.predict_ridge(model, X), y, atol=1e-5)
    assert np.allclose(model["coef"] / model["scale"], [2, -1, 10], atol=1e-4)


def test_isotonic_fit_is_non_decreasing_and_pools_violators():
    knots, fitted = gen.fit_isotonic([1, 2, 3, 3, 4], [1.0, 3.0, 2.0, 2.0, 5.0])
    assert knots.tolist() == [1, 2, 3, 4]
    # 3.0 at x=2 and the two 2.0 at x=3 pool to 7/3.
    assert np.allclose(fitted, [1.0, 7 / 3, 7 / 3, 5.0])
    assert np.all(np.diff(gen.predict_isotonic((knots, fitted), np.linspace(0, 5, 50))) >= 0)


# ---------------------------------------------------------------- thresholds


def test_share_matching_threshold_reproduces_the_gold_share():
    scores = np.linspace(0, 1, 101)
    gold = np.zeros(101, dtype=bool)
    gold[:30] = True  # 30 % OK, whatever the scores
    t = gen.share_matching_threshold(scores, gold)
    assert abs(np.mean(scores >= t) - 0.30) < 0.01


def test_out_of_fold_thresholds_are_fitted_without_their_group():
    # Each group's scores sit on its own scale; a threshold fitted with the group
    # included would move. Leave-one-out thresholds equal the fit on the others.
    rng = np.random.default_rng(5)
    groups = np.repeat(np.arange(4), 50)
    scores = rng.uniform(size=200) + groups
    gold = rng.uniform(size=200) < 0.6
    per_fold = gen.fold_thresholds(scores, gold, groups, gen.share_matching_threshold)
    for g in range(4):
        assert per_fold[str(g)] == gen.share_matching_threshold(scores[groups != g], gold[groups != g])
    fit, predict = gen.threshold_fit(gen.share_matching_threshold)
    oof = gen.out_of_fold(scores[:, None], gold, groups, fit, predict)
    for g in range(4):
        assert np.array_equal(oof[groups == g], (scores[groups == g] >= per_fold[str(g)]).astype(float))


def test_label_measures_gap_in_points():
    m = gen.label_measures([True, True, False, False], [True, True, True, False])
    assert m["metric_ok_share"] == 0.5 and m["rater_ok_share"] == 0.75
    assert m["gap_points"] == pytest.approx(-25.0)
    assert m["precision_not_ok"] == 0.5 and m["recall_not_ok"] == 1.0


# ---------------------------------------------------------------- stored scores and the gap


def _run(scores, semantics, grammar):
    seg = lambda h: {"pearson": {"value": stats.correlations(scores, h)["pearson"]}}  # noqa: E731
    return {"measures": {"scatter": {"score": list(scores), "semantics": [round(float(v), 4) for v in semantics]},
                         "segment": {"semantics": seg(semantics), "grammar": seg(grammar)}}}


def test_check_order_accepts_the_right_order_and_catches_a_permutation():
    rng = np.random.default_rng(2)
    semantics = rng.integers(1, 4, size=60).astype(float)
    grammar = rng.integers(1, 4, size=60).astype(float)
    scores = semantics + rng.normal(size=60)
    human = {"semantics": semantics, "grammar": grammar}
    assert gen.check_order(_run(scores, semantics, grammar), human) is None
    # The same scores stored in another order (semantics kept as stored) must fail.
    perm = rng.permutation(60)
    moved = _run(scores, semantics, grammar)
    moved["measures"]["scatter"]["score"] = list(scores[perm])
    assert gen.check_order(moved, human) is not None
    assert "outputs" in gen.check_order(_run(scores[:10], semantics[:10], grammar[:10]), human)


def test_bootstrap_gap_sign_follows_the_halves():
    rng = np.random.default_rng(4)
    ids = np.repeat(np.arange(40), 5)
    unseen = ids >= 20
    y = rng.normal(size=200)
    x = np.where(unseen, y + 3.0 * rng.normal(size=200), y + 0.1 * rng.normal(size=200))  # worse on unseen
    gap = gen.bootstrap_gap(x, y, ids, unseen, n_boot=50, seed=0)
    assert gap["value"] < -0.3 and gap["high"] < 0


def test_ok_weights_give_the_ok_outputs_their_share():
    ratings = np.array([1.0, 1.5, 2.0, 2.5, 3.0, 3.0])
    w = stats.ok_weights(ratings, 2.0, 0.95)
    assert w.sum() == pytest.approx(1.0)
    assert w[ratings >= 2.0].sum() == pytest.approx(0.95) and w[ratings < 2.0].sum() == pytest.approx(0.05)
    assert len(set(w[ratings >= 2.0])) == 1  # equal within a group
    assert np.allclose(stats.ok_weights(np.full(4, 3.0), 2.0), 0.25)  # one group only: plain weights
    with pytest.raises(ValueError):
        stats.ok_weights(ratings, 2.0, 1.0)


def test_weighted_pearson_is_pearson_with_equal_weights_and_follows_the_weights():
    rng = np.random.default_rng(0)
    x, y = rng.normal(size=50), rng.normal(size=50)
    assert stats.weighted_pearson(x, y, np.ones(50)) == pytest.approx(stats.correlations(x, y)["pearson"])
    # agreement only among the first 25 outputs: weighting them up raises the correlation
    y2 = np.concatenate([x[:25] + 0.1 * rng.normal(size=25), rng.normal(size=25)])
    heavy_first = np.concatenate([np.full(25, 0.95 / 25), np.full(25, 0.05 / 25)])
    assert stats.weighted_pearson(x, y2, heavy_first) > stats.weighted_pearson(x, y2, np.ones(50)) + 0.1


def test_ok_weighted_pearson_rewards_ranking_the_good_outputs():
    rng = np.random.default_rng(1)
    semantics = np.concatenate([rng.uniform(2.0, 3.0, 80), rng.uniform(1.0, 2.0, 20)])
    unseen = np.arange(100) % 2 == 1
    coarse = (semantics >= 2.0).astype(float)  # tells good from bad, orders no good output
    fine = semantics + 0.05 * rng.normal(size=100)
    a, b = gen.ok_weighted_pearson(coarse, semantics, unseen), gen.ok_weighted_pearson(fine, semantics, unseen)
    assert set(a) == {"all", "seen", "unseen"}
    assert b["all"] > a["all"] + 0.2 and b["unseen"] > a["unseen"] + 0.2


# ---------------------------------------------------------------- real data


def test_webnlg_split_and_stored_scores(shared, tmp_path):
    from benchmarks.data import load_webnlg

    dataset = load_webnlg()
    categories, unseen = gen.webnlg_categories(dataset, shared)
    assert unseen == list(gen.EXPECTED_UNSEEN)
    systems = [c for c, it in zip(categories, dataset.items) if it.system != dataset.reference_system]
    assert len(systems) == 2007 and int(gen.unseen_mask(systems, unseen).sum()) == 675
    runs = gen.stored_scatter(gen.META_DIR)
    if not runs:
        pytest.skip("no stored metric results in benchmarks/meta_eval")
    out, results_md = tmp_path / "g.json", tmp_path / "RESULTS.md"
    assert gen.main(["--bootstrap", "5", "--system-bootstrap", "5", "--output", str(out), "--results", str(results_md)]) == 0
    data = json.loads(out.read_text())
    assert data["order_failed"] == []  # every stored metric's scores are in the loader's order
    assert set(data["correlations"]) == set(runs)
    for model in data["combination"]["models"].values():
        assert -1 <= model["loco"]["all"]["value"] <= 1
    assert "## Generalization: seen vs unseen categories" in results_md.read_text()
    assert "A view like an evaluation of strong systems" in results_md.read_text()
    assert all(-1 <= r["ok_weighted_pearson"]["unseen"] <= 1 for r in data["correlations"].values())
    assert all(-1 <= m["loco_ok_weighted"]["all"] <= 1 for m in data["combination"]["models"].values())
    assert os.path.exists(out)


def _fake_webnlg(n_inputs=30, systems=("s1", "s2", "s3"), seed=0):
    """A WebNLG-like data set: inputs of 6 categories (2 unseen), the references' team
    included, NLI-like dump rows whose score follows the rating."""
    from types import SimpleNamespace

    rng = np.random.default_rng(seed)
    cats = ["A", "B", "C", "D", "U1", "U2"]
    items, categories, rows = [], [], []
    for i in range(n_inputs):
        for system in systems + ("webnlg",):
            semantics = float(rng.integers(3, 10)) / 3
            score = float(np.clip((semantics - 1) / 2 + 0.2 * rng.normal(), 0, 1))
            items.append(SimpleNamespace(input_id=i, system=system, prediction=f"{i}-{system}",
                                         human={"semantics": semantics}))
            categories.append(cats[i % len(cats)])
            rows.append({"input_id": i, "system": system, "prediction": f"{i}-{system}", "score": score,
                         "example": {"ok": score >= 0.5}})
    return SimpleNamespace(items=items, reference_system="webnlg"), categories, rows


def test_calibration_study_and_its_rendering():
    dataset, categories, rows = _fake_webnlg()
    cal = gen.calibration_study(dataset, categories, ["U1", "U2"], rows, None)
    assert cal["n"] == 90  # the references' team is left out
    for threshold in gen.RATER_OK_THRESHOLDS:
        rules = cal["by_rater_threshold"][str(threshold)]["rules"]
        loco = rules["t fitted (share), leave-category-out"]
        assert sorted(loco["fold_thresholds"]) == ["A", "B", "C", "D", "U1", "U2"]
        n_unseen = sum(1 for c, it in zip(categories, dataset.items) if it.system != "webnlg" and c in ("U1", "U2"))
        assert loco["unseen"]["n"] == n_unseen
    cal["source"] = {"command": "cmd", "date": "d", "commit": "c"}
    results = {"split": {"unseen": ["U1", "U2"], "seen": ["A", "B", "C", "D"], "n_seen": 60, "n_unseen": 30,
                         "semantics": gen.rating_spread([1.0, 3.0, 2.0], [False, True, True])},
               "settings": {"bootstrap": 1, "system_bootstrap": 1}, "order_failed": [], "correlations": {},
               "calibration": cal, "command": "python -m benchmarks.generalization", "date": "d", "commit": "c"}
    text = gen.render(results)
    assert "### NLI labels" in text and text.count("| ≥ 2.5 |") == 5 and text.count("| ≥ 2.0 |") == 5


def test_read_dump_rejects_rows_out_of_order(tmp_path):
    dataset, _, rows = _fake_webnlg(n_inputs=2)
    path = tmp_path / "dump.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert len(gen.read_dump(str(path), dataset)) == len(rows)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows[1:] + rows[:1]))
    with pytest.raises(ValueError, match="row 0"):
        gen.read_dump(str(path), dataset)


# ---------------------------------------------------------------- calibrated labels (#34 item 3)


def test_fact_accuracy_label_study_fits_out_of_fold_and_renders():
    dataset, categories, rows = _fake_webnlg()
    keep = [it.system != "webnlg" for it in dataset.items]
    scores = [r["score"] for r, k in zip(rows, keep) if k]
    runs = {"fact_accuracy": {"measures": {"scatter": {"score": scores}}, "signature": "fa|sig", "command": "cmd",
                              "date": "d", "commit": "c"}}
    study = gen.fact_accuracy_label_study(dataset, categories, ["U1", "U2"], runs)
    assert list(study) == ["fact_accuracy"]  # configs without stored scores are left out
    by = study["fact_accuracy"]["by_rater_threshold"]
    assert list(by) == [str(t) for t in gen.RATER_OK_THRESHOLDS] and gen.RATER_OK_THRESHOLDS[0] == 2.0
    loco = by["2.0"]["rules"]["t fitted (share), leave-category-out"]
    s, cats = np.array(scores), np.array([c for c, k in zip(categories, keep) if k])
    semantics = np.array([it.human["semantics"] for it, k in zip(dataset.items, keep) if k])
    for c, t in loco["fold_thresholds"].items():  # each fold's t from the other categories only
        assert t == gen.share_matching_threshold(s[cats != c], semantics[cats != c] >= 2.0)
    text = "\n".join(gen.render_fact_accuracy_labels(study, None))
    assert "### fact_accuracy labels" in text and text.count("| `fact_accuracy` |") == 4
    assert "no threshold file" in text


def test_nli_labels_table_and_shipped_threshold_text():
    measures = {"omission_per_fact": {"n": 10, "flagged": 4, "gold": 5, "precision": 0.75, "recall": 0.6, "f1": 0.667,
                                      "recall_missing": 0.5, "recall_wrong_value": 1.0},
                "hallucination_per_output": {"flagged": 2, "gold": 3, "precision": 1.0, "recall": 0.667, "f1": 0.8},
                "ok_per_output": {"metric_ok_share": 0.5, "script_ok_share": 0.6, "accuracy": 0.9}}
    data = {"n": 3, "seed": 0, "max_score_difference": 0.0, "command": "cmd", "date": "d", "commit": "c", "load_average": 1.0,
            "decisions": {d: {"signature": f"sig-{d}", **measures} for d in ("paper", "calibrated")}}
    text = "\n".join(gen.render_nli_labels(data))
    assert "| paper | 4 / 5 of 10 | 75.0 | 60.0 |" in text and "| calibrated |" in text
    oof = {"vs raters >= 2.0": {h: {"metric_ok_share": 0.45, "rater_ok_share": 0.425, "gap_points": 2.5,
                                    "precision_not_ok": 0.9, "recall_not_ok": 0.8} for h in ("all", "seen", "unseen")}}
    shipped = gen.shipped_text({"threshold": 0.0331, "command": "c", "date": "d", "commit": "x", "out_of_fold": oof}, "m", "what")
    assert "t = 0.0331" in shipped and "unseen 45.0% / 42.5% (+2.5)" in shipped


def test_calibration_from_stored_scores_checks_it_matches_the_calibration_run():
    from training.nli_semantic_accuracy.calibrate import fit_calibration

    dataset, categories, rows = _fake_webnlg()
    keep = [it.system != "webnlg" for it in dataset.items]
    scores = np.array([r["score"] for r, k in zip(rows, keep) if k])
    cats = [c for c, k in zip(categories, keep) if k]
    semantics = np.array([it.human["semantics"] for it, k in zip(dataset.items, keep) if k])
    stored = {"measures": {"scatter": {"score": scores.tolist()}}, "command": "cmd", "date": "d", "commit": "c"}
    entry = {**fit_calibration(scores, semantics, cats, ["U1", "U2"], paper_ok=scores >= 0.5), "command": "cal"}
    cal = gen.calibration_from_stored(dataset, categories, ["U1", "U2"], stored, entry)
    assert cal["same_scores_as_calibration_run"]
    rules = cal["by_rater_threshold"]["2.0"]["rules"]
    assert rules["paper's decision (argmax)"]["unseen"] == entry["paper_decision"]["vs raters >= 2.0"]["unseen"]
    other = {**entry, **fit_calibration(scores[::-1], semantics, cats, ["U1", "U2"], paper_ok=scores >= 0.5)}
    assert not gen.calibration_from_stored(dataset, categories, ["U1", "U2"], stored, other)["same_scores_as_calibration_run"]


def test_dae_pooling_is_chosen_without_the_held_out_category():
    """benchmarks.dae_pooling: each category is scored with the pooling that ranks the *other*
    categories best, so a pooling that only fits the held-out one is never used on it."""
    import numpy as np

    from benchmarks.dae_pooling import POOLINGS, choose_by_category, pooled_scores

    arcs = [[0.9, 0.1], [0.8, 0.7], [0.6], [], [0.95, 0.9, 0.2], [0.5, 0.5]]
    scores = pooled_scores(arcs)
    assert set(scores) == set(POOLINGS)
    assert scores["mean_min"][0] == (0.5 + 0.1) / 2 and scores["min"][3] == scores["mean"][3] == 0.0
    from scipy.stats import spearmanr

    human = np.array([1.0, 3.0, 2.0, 0.0, 1.2, 2.5])
    categories = ["A", "A", "A", "B", "B", "B"]
    chosen, oof = choose_by_category(scores, human, categories)
    assert set(chosen) == {"A", "B"} and not np.isnan(oof).any()
    for held, rows, other in (("A", slice(0, 3), slice(3, 6)), ("B", slice(3, 6), slice(0, 3))):
        # the choice for a held-out category is the best pooling on the other one
        assert chosen[held] == max(POOLINGS, key=lambda name: spearmanr(scores[name][other], human[other])[0])
        assert list(oof[rows]) == list(scores[chosen[held]][rows])


def test_dae_two_direction_candidates_score_as_the_metric_does():
    """benchmarks.dae_pooling's direction="both" candidates: the table's arcs pooled one way, joined to
    the text's mean_min score another; a text without arcs keeps 0.0, as the metric scores it."""
    from benchmarks.dae_pooling import JOINS, SOURCE_POOLINGS, both_direction_scores
    from metrics.dae.verdicts import BOTH, SOURCE_POOLING

    text = [[0.9, 0.1], [0.8, 0.7], []]
    source = [[0.6, 0.2], [0.9], [0.5]]
    scores = both_direction_scores(text, source)
    assert len(scores) == len(SOURCE_POOLINGS) * len(JOINS)
    shipped = scores[f"both: {BOTH}, source {SOURCE_POOLING}"]
    assert list(shipped) == pytest.approx([min((0.5 + 0.1) / 2, (0.4 + 0.2) / 2), min((0.75 + 0.7) / 2, 0.9), 0.0])
    assert list(scores["both: source, source min"]) == [0.2, 0.9, 0.0]
    assert scores["both: product, source mean"][0] == pytest.approx((0.5 + 0.1) / 2 * 0.4)

