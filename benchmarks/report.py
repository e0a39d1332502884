"""Render stored per-metric results as RESULTS.md sections (one per benchmark)."""

from __future__ import annotations

import math
from typing import Dict, List

from . import papers
from .results_md import markdown_table

SECTIONS = ("meta_setup", "meta_webnlg_segment", "meta_webnlg_system", "meta_webnlg_binary", "meta_e2e", "meta_dae_pairs", "meta_speed")
ASPECTS = ("semantics", "grammar", "fluency")


def _isnan(v) -> bool:
    return v is None or (isinstance(v, float) and math.isnan(v))


def f3(v) -> str:
    return "—" if _isnan(v) else f"{v:.3f}"


def pct(v) -> str:
    return "—" if _isnan(v) else f"{100 * v:.1f}"


def signed(v, percent: bool = False) -> str:
    if _isnan(v):
        return "—"
    return f"{100 * v:+.1f}" if percent else f"{v:+.3f}"


def code(text) -> str:
    """Inline code in a table cell: pipes must be escaped or they split the cell."""
    return "`" + str(text).replace("|", "\\|") + "`"


def ci(d: Dict) -> str:
    return f"{f3(d['value'])} [{f3(d['low'])}, {f3(d['high'])}]"


def _runs(results: Dict[str, Dict], dataset: str):
    for name, res in results.items():
        run = res.get("datasets", {}).get(dataset)
        if run:
            yield name, run


def _provenance(results: Dict[str, Dict], dataset: str) -> str:
    lines = []
    for name, run in _runs(results, dataset):
        smoke = " (SMOKE subset)" if run.get("smoke") else ""
        lines.append(f"- `{name}`{smoke}: `{run['command']}` ({run['date']}, commit {run['commit']})")
    return "Produced by:\n" + "\n".join(lines) if lines else ""


def _vs(name: str, key, ours: float, reference: bool = False, percent: bool = False) -> List[str]:
    fig = papers.figure(name, key, reference=reference)
    if fig is None:
        return ["—", "—"]
    shown = pct(fig.value) if percent else f3(fig.value)
    return [shown, signed(ours - fig.value, percent)]


def setup_section(results: Dict[str, Dict], specs: Dict, skipped: Dict[str, str], plots: List[str]) -> str:
    rows = []
    for name, spec in specs.items():
        res = results.get(name)
        if res and res.get("datasets"):
            for ds, run in res["datasets"].items():
                rows.append([f"`{name}`", ds, run["n"], run["model"], code(run["signature"])])
        else:
            rows.append([f"`{name}`", "—", "—", "—", "not run yet: " + skipped.get(name, "not requested")])
    text = [
        "## Meta-evaluation: setup",
        "",
        "How well each metric agrees with human judgements, measured the way the papers did "
        "(`python -m benchmarks.run`, see `benchmarks/README.md`): correlations with bootstrap CIs over the inputs, "
        "system-level Pearson as in Dhingra et al.'s `webnlg_correlations.py`, binary agreement, reranking, speed. "
        "Each section names the command, date and commit behind each metric's rows; the signatures give each metric's settings.",
        "",
        markdown_table(["Metric", "Data set", "Examples", "Model / checkpoint", "Signature"], rows),
    ]
    if plots:
        text += ["", "Plots: " + ", ".join(f"[{p}](plots/{p})" for p in plots)]
    return "\n".join(text)


def webnlg_segment_section(results: Dict[str, Dict]) -> str:
    rows = []
    for name, run in _runs(results, "webnlg"):
        seg = run["measures"]["segment"]
        for aspect in ASPECTS:
            c = seg[aspect]
            # A reference implementation's scores where we have them, else the paper's figure.
            kinds = ("pearson", "spearman")
            figs, marker = [papers.figure(name, ("webnlg", "segment", k, aspect), reference=True) for k in kinds], ""
            if not any(figs):
                figs, marker = [papers.figure(name, ("webnlg", "segment", k, aspect)) for k in kinds], " (paper)"
            target = delta = "—"
            if any(figs):
                target = " / ".join(f3(f.value) if f else "—" for f in figs) + marker
                delta = " / ".join(signed(c[k]["value"] - f.value) if f else "—" for k, f in zip(kinds, figs))
            rows.append([f"`{name}`", aspect, ci(c["pearson"]), ci(c["spearman"]), ci(c["kendall"]), target, delta])
    if not rows:
        return "## WebNLG 2017: segment-level correlation\n\nNo results yet."
    first = next(run["measures"] for _, run in _runs(results, "webnlg"))
    n, n_boot = first["n_systems_outputs"], first.get("n_bootstrap", 1000)
    return "\n".join([
        "## WebNLG 2017: segment-level correlation with human ratings",
        "",
        f"{n} outputs of the 9 systems (references excluded); 95% CIs from {n_boot:,} bootstrap resamples of the inputs "
        "(all outputs of a drawn input kept). "
        "Target: Pearson / Spearman of the reference implementation's scores (PARENT: shared/golden), else the paper's "
        "figure, marked (paper) (data_questeval: Rebuffel et al. 2021, Table 1, Pearson only).",
        "",
        markdown_table(["Metric", "Aspect", "Pearson [95% CI]", "Spearman [95% CI]", "Kendall τ-b [95% CI]", "Target (P / S)", "Δ (P / S)"], rows),
        "",
        _provenance(results, "webnlg"),
    ])


def webnlg_system_section(results: Dict[str, Dict]) -> str:
    rows = []
    for name, run in _runs(results, "webnlg"):
        for aspect in ASPECTS:
            variants = run["measures"]["system"][aspect]
            for variant, d in variants.items():
                label = f"`{name}`" if variant == "pearson" else f"`{name}` (mean of segment scores)"
                paper = _vs(name, ("webnlg", "system", "pearson", aspect), d["value"]) if variant == "pearson" else ["—", "—"]
                ref = _vs(name, ("webnlg", "system", "pearson", aspect), d["value"], reference=True) if variant == "pearson" else ["—", "—"]
                rows.append([label, aspect, f3(d["value"]), f"[{f3(d['low'])}, {f3(d['high'])}]", f3(d["mc_se"]), f3(d["full_sample"]), *paper, *ref])
    if not rows:
        return "## WebNLG 2017: system-level correlation\n\nNo results yet."
    first = next(run["measures"]["system"]["semantics"]["pearson"] for _, run in _runs(results, "webnlg"))
    return "\n".join([
        "## WebNLG 2017: system-level correlation with human ratings",
        "",
        f"Pearson over the {first['n_systems']} systems' scores, averaged over {first['n_resamples']} bootstrap resamples of the {first['n_inputs']} inputs "
        "(Python `random` seeded 0, as `webnlg_correlations.py`). The interval is the 2.5–97.5 percentile of the "
        "resamples; MC s.e. is the Monte-Carlo error of the mean (a different seed moves the figure by about that much). "
        "BLEU's system score is corpus BLEU (summed n-gram statistics), as in the paper.",
        "",
        markdown_table(
            ["Metric", "Aspect", "Pearson (mean of 500)", "Interval", "MC s.e.", "No resampling", "Paper", "Δ paper", "Ref. impl.", "Δ ref."],
            rows,
        ),
        "",
        _provenance(results, "webnlg"),
    ])


def _binary_row(name, label, mode, d, fig_cols) -> List[str]:
    return [
        label, mode, d["n"], pct(d["accuracy"]), f3(d["precision_not_ok"]), f3(d["recall_not_ok"]), f3(d["f1_not_ok"]),
        f3(d.get("auc")), pct(d["majority_accuracy"]), *fig_cols,
    ]


def webnlg_binary_section(results: Dict[str, Dict]) -> str:
    rows = []
    for name, run in _runs(results, "webnlg"):
        for threshold, subsets in run["measures"]["binary"].items():
            for subset, modes in subsets.items():
                label = f"`{name}` ≥{threshold}, {subset}"
                if "labels" in modes:
                    d = dict(modes["labels"], auc=modes["threshold"]["auc"])
                    figs = _vs(name, ("webnlg", "binary", threshold, "accuracy"), d["accuracy"], percent=True) if subset == "all" else ["—", "—"]
                    rows.append(_binary_row(name, label, "metric's labels", d, figs))
                d = modes["threshold"]
                rows.append(_binary_row(name, label, f"oracle threshold {d['threshold']:.3g}", d, ["—", "—"]))
    if not rows:
        return "## WebNLG 2017: binary agreement\n\nNo results yet."
    return "\n".join([
        "## WebNLG 2017: binary agreement with human semantics",
        "",
        "Gold OK = mean semantics rating ≥ threshold. `systems`: the 9 systems' outputs; `all`: also the references "
        "(2,230 outputs, Dušek & Kasner's setup; only for reference-free metrics, since a reference matches itself). "
        "Metrics that classify are scored on their own labels; every metric also at the *oracle* threshold on its score "
        "that maximizes accuracy on these data (an upper bound, not a usable setting). P/R/F1 are for the not-OK class; "
        "AUC: probability that an OK output scores higher than a not-OK one.",
        "",
        markdown_table(["Metric, gold threshold, outputs", "Decision", "n", "Accuracy %", "P not-OK", "R not-OK", "F1 not-OK", "AUC", "Majority %", "Paper %", "Δ"], rows),
        "",
        _provenance(results, "webnlg"),
    ])


def e2e_section(results: Dict[str, Dict]) -> str:
    rows = []
    for name, run in _runs(results, "e2e"):
        m = run["measures"]
        two = m["binary"]["2way"]
        four = m["binary"].get("4way")
        sys_corr = m["system"]["ok_rate"]["pearson"]["value"]
        if "labels" in two:
            d = dict(two["labels"], auc=two["threshold"]["auc"])
            figs = _vs(name, ("e2e", "binary", "2way", "accuracy"), d["accuracy"], percent=True)
            rows.append([*_binary_row(name, f"`{name}`", "metric's labels", d, figs), pct(four["accuracy"]) if four else "—", f3(sys_corr)])
        d = two["threshold"]
        rows.append([*_binary_row(name, f"`{name}`", f"oracle threshold {d['threshold']:.3g}", d, ["—", "—"]), "—", f3(sys_corr)])
    if not rows:
        return "## E2E: agreement with the slot-error script\n\nNo results yet."
    return "\n".join([
        "## E2E: agreement with the slot-error script",
        "",
        "Outputs of the 21 primary E2E systems on the 630 test MRs; gold = the slot-error script's labels "
        "(OK vs. not OK; 4-way OK / omission / hallucination / hallucination+omission). "
        "System r: Pearson over the 21 systems between the metric's system score and the share of outputs the script "
        "finds OK (mean of 500 input resamples).",
        "",
        markdown_table(
            ["Metric", "Decision", "n", "2-way acc. %", "P not-OK", "R not-OK", "F1 not-OK", "AUC", "Majority %", "Paper %", "Δ", "4-way acc. %", "System r"],
            rows,
        ),
        "",
        _provenance(results, "e2e"),
    ])


def pairs_section(results: Dict[str, Dict]) -> str:
    rows = []
    for name, run in _runs(results, "dae_pairs"):
        r = run["measures"]["rerank"]
        rows.append([f"`{name}`", r["n"], pct(r["accuracy"]), pct(r["accuracy_ties_half"]), f"{r['wins']} / {r['ties']} / {r['losses']}",
                     *_vs(name, ("dae_pairs", "rerank", "accuracy"), r["accuracy"], percent=True)])
    if not rows:
        return "## Summary pairs: reranking\n\nNo results yet."
    context = ", ".join(f"{n} {100 * v:.1f}" for n, v in papers.DAE_CONTEXT_ROWS)
    return "\n".join([
        "## Summary pairs (Falke et al. 2019): reranking accuracy",
        "",
        "The correct summary sentence must score higher than the incorrect one given the article sentence "
        "(reference-based baselines use the article sentence as the reference). Ties are broken at random (seed 0); "
        "the ties-as-half column is the expectation over tie-breaks.",
        "",
        markdown_table(["Metric", "Pairs", "Accuracy %", "Ties as ½ %", "Wins / ties / losses", "Paper %", "Δ"], rows),
        "",
        f"Paper figures for context ({papers.DAE_PAPER}): {context}.",
        "",
        _provenance(results, "dae_pairs"),
    ])


def speed_section(results: Dict[str, Dict], specs: Dict) -> str:
    rows = []
    for name, res in results.items():
        for ds, run in res.get("datasets", {}).items():
            s = run.get("speed")
            if not s:
                continue
            ref = specs[name].speed_reference.get(ds) if name in specs else None
            ref_cols = ["—", "—"]
            if ref and ref[0] == run["n"]:
                ref_cols = [f"{ref[1]:.1f}", f"{ref[1] / s['seconds']:.2f}×"]
            b = s.get("baseline")
            if b:
                ref_cols = [
                    f"{b['baseline_seconds']:.1f} ({b['name']}, first {b['n']} ex., same run; ours {b['ours_seconds']:.1f})",
                    f"{b['baseline_seconds'] / b['ours_seconds']:.2f}×",
                ]
            rows.append([
                f"`{name}`", ds, run["n"], s.get("device", "cpu"), "—" if _isnan(s.get("load_average")) else f"{s['load_average']:.1f} / {s.get('cpu_count', '?')}",
                f"{s['load_seconds']:.1f}", f"{s['seconds']:.2f}",
                f"{run['n'] / s['seconds']:.0f}" if s["seconds"] > 0 else "—",
                f"{s['rss_peak_delta_mb']:.0f}", f"{s['max_rss_mb']:.0f}",
                "—" if _isnan(s.get("python_peak_mb")) else f"{s['python_peak_mb']:.2f} ({s['python_peak_n']} ex.)",
                "—" if _isnan(s.get("cuda_peak_mb")) else f"{s['cuda_peak_mb']:.0f}",
                *ref_cols,
            ])
    if not rows:
        return "## Speed\n\nNo results yet."
    notes = [f"- `{name}`: {specs[name].speed_note}" for name in results if name in specs and specs[name].speed_note]
    return "\n".join([
        "## Speed and memory",
        "",
        "One `compute()` call per data set, after loading (load time separate), no tracemalloc during the timed call. "
        "Peak RSS Δ: peak resident memory during the call above the resident memory before it (sampled every 10 ms); "
        "max RSS: the process's peak so far (all metrics run in one process); Python peak: tracemalloc peak in a separate "
        "call on the first examples. Reference: the reference implementation's time for the same examples "
        "(PARENT: shared/golden/README.md, same machine type), or a reference-style slow path timed in the same run "
        "(model metrics: one pair per forward pass); speed-up = reference time / ours. Load avg: the machine's 1-minute "
        "load average when the call ended (other jobs share the CPUs; a load above the CPU count slows every timing).",
        "",
        markdown_table(["Metric", "Data set", "n", "Device", "Load avg / CPUs", "Load s", "Compute s", "Examples/s", "Peak RSS Δ MB", "Max RSS MB", "Python peak MB", "CUDA peak MB", "Reference s", "Speed-up"], rows),
        *([""] + notes if notes else []),
    ])


def render_all(results: Dict[str, Dict], specs: Dict, skipped: Dict[str, str], plots: List[str]) -> Dict[str, str]:
    return {
        "meta_setup": setup_section(results, specs, skipped, plots),
        "meta_webnlg_segment": webnlg_segment_section(results),
        "meta_webnlg_system": webnlg_system_section(results),
        "meta_webnlg_binary": webnlg_binary_section(results),
        "meta_e2e": e2e_section(results),
        "meta_dae_pairs": pairs_section(results),
        "meta_speed": speed_section(results, specs),
    }
