"""Runtime and training apart (issue #33): a metric folder, as the wheel and each
Hub Space ship it, holds the metric's module, its scoring siblings, ``app.py``,
``requirements.txt`` and its card, and no training or data-preparation code.

What counts as training code is read off ``training/``: every module under
``training/<metric>/`` is one of that metric's training modules, so a module
moved there (or added) is covered without editing this file. A metric folder
must hold no module of that name, import none of them (nor ``training``),
and have no command line of its own (``argparse``: the training and data
commands are the ones with a command line; a metric is called through
evaluate, the CLI or its app).
"""

import ast
import json
import os
import subprocess
import sys

import pytest

from d2t_metrics import publish

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
METRICS_DIR = os.path.join(ROOT, "metrics")
TRAINING_DIR = os.path.join(ROOT, "training")
# Imports that only a command line needs: a metric folder has none.
COMMAND_LINE_MODULES = {"argparse"}


def metric_names():
    return sorted(n for n in os.listdir(METRICS_DIR) if os.path.isfile(os.path.join(METRICS_DIR, n, f"{n}.py")))


METRICS = metric_names()


def training_modules(name):
    """The module names under ``training/<name>/`` (``__init__`` left out)."""
    folder = os.path.join(TRAINING_DIR, name)
    if not os.path.isdir(folder):
        return set()
    return {f[:-3] for f in os.listdir(folder) if f.endswith(".py") and f != "__init__.py"}


def python_files(folder):
    """Paths of the ``.py`` files under ``folder``, relative to it, caches left out."""
    found = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__" and not d.startswith("."))
        found += [os.path.relpath(os.path.join(dirpath, f), folder) for f in sorted(filenames) if f.endswith(".py")]
    return found


def imports_of(path):
    """``(level, dotted module)`` of every import in a file, at any depth: ``from . import x``
    gives ``(1, "x")``, ``from .a import b`` gives ``(1, "a")``, ``import a.b`` gives ``(0, "a.b")``."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read(), filename=path)
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(0, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.module:
                out.append((node.level, node.module))
            else:
                out += [(node.level, alias.name) for alias in node.names]
    return out


def training_import(level, module, name, training):
    """Whether an import in ``metrics/<name>/`` reaches training code: the ``training``
    package, a sibling that is a training module, or one through ``metrics.<name>.``."""
    parts = module.split(".")
    if level:
        return parts[0] in training
    if parts[0] == "training":
        return True
    return parts[:2] == ["metrics", name] and len(parts) > 2 and parts[2] in training


def stems(paths):
    return {os.path.splitext(os.path.basename(p))[0] for p in paths if p.endswith(".py")}


def test_training_folders_are_packages_named_after_metrics():
    assert os.path.isfile(os.path.join(TRAINING_DIR, "__init__.py"))
    for name in os.listdir(TRAINING_DIR):
        folder = os.path.join(TRAINING_DIR, name)
        if os.path.isdir(folder) and name != "__pycache__":
            assert name in METRICS, f"training/{name}/ names no metric of metrics/"
            assert os.path.isfile(os.path.join(folder, "__init__.py")), f"training/{name}/ has no __init__.py"


@pytest.mark.parametrize("name", METRICS)
def test_metric_folder_holds_no_training_module(name):
    folder = os.path.join(METRICS_DIR, name)
    training = training_modules(name)
    files = python_files(folder)
    assert f"{name}.py" in files
    assert not stems(files) & training, f"metrics/{name}/ holds training modules {sorted(stems(files) & training)}"


@pytest.mark.parametrize("name", METRICS)
def test_metric_folder_imports_no_training_code(name):
    folder = os.path.join(METRICS_DIR, name)
    training = training_modules(name)
    for rel in python_files(folder):
        for level, module in imports_of(os.path.join(folder, rel)):
            assert not training_import(level, module, name, training), \
                f"metrics/{name}/{rel} imports training code: {'.' * level}{module}"
            if not level:
                assert module.split(".")[0] not in COMMAND_LINE_MODULES, \
                    f"metrics/{name}/{rel} has a command line ({module}): training and data commands belong in training/{name}/"


def test_the_checks_catch_training_imports():
    training = {"train", "qa_data"}
    assert training_import(1, "qa_data", "m", training)
    assert training_import(0, "training.m.train", "m", training)
    assert training_import(0, "metrics.m.train", "m", training)
    assert not training_import(1, "qa", "m", training)
    assert not training_import(0, "metrics.m.qa", "m", training)
    assert not training_import(0, "metrics.other.train", "m", training)


# Run in a fresh interpreter: importing setuptools after another test imported the standard
# library's distutils trips setuptools' distutils shim, so the suite's order must not matter.
_SETUP_ARGUMENTS = """
import json, setuptools, sys
captured = {}
setuptools.setup = lambda **kwargs: captured.update(kwargs)
path = sys.argv[1]
with open(path, encoding="utf-8") as f:
    exec(compile(f.read(), path, "exec"), {"__file__": path, "__name__": "setup_under_test"})
keys = ("packages", "package_dir", "package_data")
print(json.dumps({k: captured[k] for k in keys if k in captured}))
"""


def setup_arguments():
    """The keyword arguments ``setup.py`` gives ``setuptools.setup`` (run with ``setup`` replaced: nothing is built)."""
    done = subprocess.run([sys.executable, "-c", _SETUP_ARGUMENTS, os.path.join(ROOT, "setup.py")], cwd=ROOT,
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0 and done.stdout.strip(), f"setup.py did not call setuptools.setup: {done.stderr[-2000:]}"
    return json.loads(done.stdout)


def test_the_wheel_carries_no_training_code():
    args = setup_arguments()
    packages = args["packages"]
    assert not [p for p in packages if p == "training" or p.startswith("training.")], packages
    assert "training" not in (args.get("package_dir") or {}).values()
    assert os.path.normpath(args["package_dir"]["d2t_metrics.metrics"]) == "metrics"
    shipped = args["package_data"]["d2t_metrics.metrics"]
    assert shipped, "the wheel carries no metric file"
    for name in METRICS:
        files = [p[len(name) + 1:] for p in shipped if p.startswith(name + "/")]
        assert f"{name}.py" in files, f"the wheel lacks d2t_metrics/metrics/{name}/{name}.py"
        bad = stems(files) & training_modules(name)
        assert not bad, f"the wheel's d2t_metrics/metrics/{name}/ would hold training modules {sorted(bad)}"


@pytest.fixture(scope="module")
def space_plan(tmp_path_factory):
    """The Spaces ``python -m d2t_metrics.publish`` would upload, staged from a root whose
    metrics/, spaces/ and examples/ are this checkout's (no checkpoints: they are no Space)."""
    root = tmp_path_factory.mktemp("publish_root")
    for folder in ("metrics", "spaces", "examples"):
        if os.path.isdir(os.path.join(ROOT, folder)):
            os.symlink(os.path.join(ROOT, folder), root / folder)
    staging = tmp_path_factory.mktemp("staging")
    return publish.build_plan(str(root), "test-org", "0" * 40, "gh-user", str(staging))


def test_no_space_carries_training_code(space_plan):
    spaces = [u for u in space_plan if u.repo_type == "space"]
    by_metric = {u.repo_id.split("/")[1]: u for u in spaces}
    assert set(METRICS) <= set(by_metric), sorted(by_metric)
    for name in METRICS:
        files = [f["path"] for f in by_metric[name].files]
        assert f"{name}.py" in files and "app.py" in files
        bad = stems(files) & training_modules(name)
        assert not bad, f"the {name} Space would hold training modules {sorted(bad)}"
    playground = by_metric.get(publish.PLAYGROUND)
    if playground is not None:  # it carries a copy of every metric folder
        for name in METRICS:
            files = [f["path"][len(f"metrics/{name}/"):] for f in playground.files if f["path"].startswith(f"metrics/{name}/")]
            assert f"{name}.py" in files
            bad = stems(files) & training_modules(name)
            assert not bad, f"the playground's metrics/{name}/ would hold training modules {sorted(bad)}"
