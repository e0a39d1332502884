"""The package works from anywhere: a checkout (editable install) and a built wheel
both find every metric and the project's checkpoints, whatever the current directory.

The slow tests build the wheel from a copy of the checkout (so that no build/ folder
lands in the working tree), install it with ``--no-deps`` into a fresh virtual
environment, and only then make this environment's dependencies (evaluate, torch,
transformers, spaCy, ...) visible to it through a ``.pth`` file that lists this
interpreter's site-packages. A path listed in a ``.pth`` file is appended to
``sys.path`` without its own ``.pth`` files being run, so the editable install of
this checkout (an ``__editable__*.pth`` import hook) stays off, and the fresh
environment's site-packages come first: ``d2t_metrics`` is imported from the wheel.
The commands run from a temporary directory outside the checkout, without
PYTHONPATH, and check that no path of the checkout is used.
"""

import importlib.util
import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
import zipfile

import pytest

import d2t_metrics
from d2t_metrics import locations
from d2t_metrics.cli import find_checkpoints_dir, find_metrics_dir

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "examples", "examples.jsonl")

# What a build does not need: the ignored folders of .gitignore, and the checkout's own venv.
TOP_LEVEL_SKIP = {".git", ".venv", "venv", "build", "dist", ".pytest_cache", ".hypothesis", ".whl", ".gl", "tmp"}
SKIP_ANYWHERE = ("__pycache__", "*.egg-info", "*.pyc")


def repo_metrics():
    folder = os.path.join(ROOT, "metrics")
    return sorted(n for n in os.listdir(folder) if os.path.isfile(os.path.join(folder, n, f"{n}.py")))


def repo_checkpoint_files():
    """``(name, relative path)`` of every file of every ``checkpoints/<name>/`` (hidden files left out)."""
    out = []
    root = os.path.join(ROOT, "checkpoints")
    for name in sorted(os.listdir(root)) if os.path.isdir(root) else []:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, name)):
            dirnames[:] = [d for d in dirnames if not d.startswith(".") and d != "__pycache__"]
            for f in filenames:
                if not f.startswith("."):
                    out.append((name, os.path.relpath(os.path.join(dirpath, f), os.path.join(root, name)).replace(os.sep, "/")))
    return sorted(out)


# ---------------------------------------------------------------------------
# In this checkout (fast)


def test_locations_in_the_checkout(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # the answers do not depend on the current directory
    assert d2t_metrics.available_metrics() == repo_metrics()
    for name in repo_metrics():
        assert d2t_metrics.metric_path(name) == os.path.join(ROOT, "metrics", name)
    for name in sorted({n for n, _ in repo_checkpoint_files()}):
        assert d2t_metrics.checkpoint_path(name) == os.path.join(ROOT, "checkpoints", name)
    assert d2t_metrics.checkpoint_path("parent") is None  # no model, no checkpoint
    assert d2t_metrics.checkpoint_path("no_such_metric") is None
    assert locations.metrics_dir() == os.path.join(ROOT, "metrics")
    assert locations.checkpoints_dir() == os.path.join(ROOT, "checkpoints")
    assert find_metrics_dir() == os.path.join(ROOT, "metrics")
    assert find_checkpoints_dir(None, find_metrics_dir()) == os.path.join(ROOT, "checkpoints")


@pytest.mark.parametrize("name", ["no_such_metric", "", "../metrics", None])
def test_unknown_metric_is_a_value_error_listing_the_metrics(name):
    with pytest.raises(ValueError) as info:
        d2t_metrics.metric_path(name)
    assert f"unknown metric {name!r}" in str(info.value)
    assert "available: " + ", ".join(repo_metrics()) in str(info.value)
    with pytest.raises(ValueError, match="available: "):
        d2t_metrics.load(name)


def test_import_stays_light():
    code = "import sys, d2t_metrics; print(sorted(m for m in ('evaluate', 'torch', 'transformers') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, check=True).stdout
    assert out.strip() == "[]"


def project_sources():
    for folder in ("d2t_metrics", "metrics", "benchmarks", "spaces", "tests"):
        for dirpath, _dirs, files in os.walk(os.path.join(ROOT, folder)):
            yield from (os.path.join(dirpath, f) for f in files if f.endswith(".py"))


def test_sources_compile_without_warnings():
    # Python 3.12 prints a SyntaxWarning for an invalid escape such as "\\s" in a
    # docstring each time the module is compiled: users would see it on import.
    import warnings

    sources = list(project_sources())
    assert len(sources) > 50
    for path in sources:
        with open(path, encoding="utf-8") as f, warnings.catch_warnings():
            warnings.simplefilter("error")
            compile(f.read(), path, "exec")


def test_command_line_from_another_directory(tmp_path):
    # This checkout's package (whatever this environment has installed), run where there is no metrics/.
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.run([sys.executable, "-m", "d2t_metrics.cli", "list"], capture_output=True, text=True, cwd=tmp_path, env=env)
    assert proc.returncode == 0, proc.stderr
    rows = dict(line.split("\t") for line in proc.stdout.strip().splitlines())
    assert sorted(rows) == repo_metrics()
    for name in {n for n, _ in repo_checkpoint_files()}:
        assert rows[name] == os.path.join(ROOT, "checkpoints", name)


def test_dae_default_checkpoint_from_anywhere(tmp_path, monkeypatch):
    pytest.importorskip("evaluate")
    monkeypatch.chdir(tmp_path)
    module = import_metric_module("dae")
    assert module.default_model_path() == os.path.join(ROOT, "checkpoints", "dae")


def import_metric_module(name):
    """The metric's module as ``evaluate.load`` imports it (from its modules cache:
    the metric folders use relative imports)."""
    from evaluate.loading import evaluation_module_factory

    factory = evaluation_module_factory(d2t_metrics.metric_path(name))
    return importlib.import_module(factory.module_path)


@pytest.mark.slow
def test_load_from_another_directory(tmp_path, monkeypatch):
    pytest.importorskip("evaluate")
    monkeypatch.chdir(tmp_path)
    parent = d2t_metrics.load("parent")
    result = parent.compute(
        predictions=["Alan Bean was born in Wheeler, Texas."],
        references=[["Alan Bean was born in Wheeler, Texas."]],
        tables=[["Alan_Bean | birthPlace | Wheeler,_Texas"]],
    )
    assert 0.0 < result["f1"] <= 1.0


# ---------------------------------------------------------------------------
# Built wheel and editable install, in fresh environments (slow)


def clean_env(extra_path=None):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP", "PYTHONUSERBASE")}
    if extra_path:
        env["PATH"] = extra_path + os.pathsep + env.get("PATH", "")
    env.update(HF_HUB_OFFLINE="1", D2T_NO_PROGRESS="1", PIP_DISABLE_PIP_VERSION_CHECK="1", PYTHONNOUSERSITE="1",
               TOKENIZERS_PARALLELISM="false")
    return env


def run(argv, cwd, env, timeout=300, check=True):
    proc = subprocess.run([str(a) for a in argv], cwd=str(cwd), env=env, capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, argv))} exited {proc.returncode}\nstdout:\n{proc.stdout[-4000:]}\nstderr:\n{proc.stderr[-4000:]}")
    return proc


def dependency_dirs():
    """This interpreter's site-packages folders (where evaluate, torch, ... are installed)."""
    dirs = list(site.getsitepackages()) + [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]]
    if site.ENABLE_USER_SITE and os.path.isdir(site.getusersitepackages()):
        dirs.append(site.getusersitepackages())
    seen = []
    for d in dirs:
        if os.path.isdir(d) and d not in seen:
            seen.append(d)
    return seen


def bin_dir(venv):
    return os.path.join(str(venv), "Scripts" if os.name == "nt" else "bin")


def venv_python(venv):
    return os.path.join(bin_dir(venv), "python.exe" if os.name == "nt" else "python")


def pip_supports_python_option():
    import pip

    return tuple(int(p) for p in pip.__version__.split(".")[:2] if p.isdigit()) >= (22, 3)


def fresh_venv(path, wheel, workdir):
    """A new venv with ``wheel`` installed (no dependencies), then this environment's
    site-packages appended to its ``sys.path``. Returns its python."""
    run([sys.executable, "-m", "venv", "--without-pip", path], workdir, clean_env())
    python = venv_python(path)
    env = clean_env()
    # Installed while the venv sees nothing but itself, so pip never meets this
    # environment's d2t-metrics (the editable install of the checkout).
    if pip_supports_python_option():
        run([sys.executable, "-m", "pip", "--python", python, "install", "--no-deps", "--no-index", wheel], workdir, env)
    else:
        run([python, "-m", "ensurepip"], workdir, env)
        run([python, "-m", "pip", "install", "--no-deps", "--no-index", wheel], workdir, env)
    purelib = run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], workdir, env).stdout.strip()
    with open(os.path.join(purelib, "_d2t_test_dependencies.pth"), "w", encoding="utf-8") as f:
        f.write("\n".join(dependency_dirs()) + "\n")
    return python


def build_wheel(tmp_path_factory):
    """``(source copy, wheel, work dir)``: the wheel built by pip from a copy of the checkout
    (the session fixture ``build`` of conftest.py, built once for every test that needs it)."""
    if importlib.util.find_spec("pip") is None:
        pytest.skip("pip is not installed in this environment: cannot build or install the wheel")
    base = tmp_path_factory.mktemp("packaging")
    assert not str(base).startswith(ROOT + os.sep), "the temporary directory must be outside the checkout"
    src = base / "src"

    def ignore(folder, names):
        skipped = set(shutil.ignore_patterns(*SKIP_ANYWHERE)(folder, names))
        if os.path.abspath(folder) == ROOT:
            skipped |= TOP_LEVEL_SKIP & set(names)
        if os.path.abspath(folder) == os.path.join(ROOT, "benchmarks"):
            skipped |= {"out", "results"} & set(names)
        return skipped

    shutil.copytree(ROOT, src, symlinks=True, ignore=ignore)
    wheels = base / "wheels"
    argv = [sys.executable, "-m", "pip", "wheel", "--no-deps", "-w", str(wheels)]
    if importlib.util.find_spec("setuptools") is not None:
        argv += ["--no-build-isolation", "--no-index"]  # this environment's setuptools: no network
    run(argv + [str(src)], base, clean_env())
    built = sorted(os.listdir(wheels))
    assert len(built) == 1 and built[0].endswith(".whl"), built
    work = base / "work"  # the current directory of every command: outside the checkout, no metrics/ in it
    work.mkdir()
    shutil.copy(EXAMPLES, work / "examples.jsonl")
    return src, str(wheels / built[0]), work


@pytest.mark.slow
def test_wheel_holds_the_metrics_and_checkpoints(build):
    _, wheel, _ = build
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
    metrics = repo_metrics()
    assert metrics, "no metric in metrics/"
    for name in metrics:
        folder = os.path.join(ROOT, "metrics", name)
        for f in os.listdir(folder):
            if f.endswith((".py", ".json", ".md", ".txt")) and not f.startswith("."):
                assert f"d2t_metrics/metrics/{name}/{f}" in names
        assert f"d2t_metrics/metrics/{name}/{name}.py" in names
        assert f"d2t_metrics/metrics/{name}/README.md" in names
    checkpoint_files = repo_checkpoint_files()
    assert checkpoint_files, "no checkpoint in checkpoints/"
    for name, rel in checkpoint_files:
        assert f"d2t_metrics/_checkpoints/{name}/{rel}" in names
    assert "d2t_metrics/checkpoints.py" in names and "d2t_metrics/locations.py" in names
    assert "d2t_metrics/templates/webnlg.json" in names
    # Nothing at the top level of site-packages but the package and its metadata (no metrics/
    # or checkpoints/ there), and no junk.
    dist_name, version = os.path.basename(wheel).split("-")[:2]
    assert {n.split("/")[0] for n in names} == {"d2t_metrics", f"{dist_name}-{version}.dist-info"}
    assert not [n for n in names if "__pycache__" in n or n.endswith(".pyc")]


@pytest.mark.slow
def test_wheel_installed_in_a_fresh_venv_works_from_anywhere(build, tmp_path_factory):
    _, wheel, work = build
    venv = tmp_path_factory.mktemp("wheel_venv") / "venv"
    python = fresh_venv(str(venv), wheel, work)
    env = clean_env(bin_dir(venv))
    env["HF_MODULES_CACHE"] = str(tmp_path_factory.mktemp("hf_modules"))
    venv_real = os.path.realpath(str(venv))
    package = os.path.join(
        run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], work, env).stdout.strip(), "d2t_metrics"
    )

    # The package, its metrics and checkpoints come from the fresh venv; the checkout is not on sys.path.
    probe = (
        "import json, sys, d2t_metrics\n"
        "print(json.dumps({'file': d2t_metrics.__file__, 'path': sys.path, 'metrics': d2t_metrics.available_metrics(),"
        " 'paths': {n: d2t_metrics.metric_path(n) for n in d2t_metrics.available_metrics()},"
        " 'checkpoints': {n: d2t_metrics.checkpoint_path(n) for n in d2t_metrics.available_metrics()}}))\n"
    )
    info = json.loads(run([python, "-c", probe], work, env).stdout)
    assert os.path.realpath(info["file"]).startswith(venv_real + os.sep), info["file"]
    assert info["metrics"] == repo_metrics()
    for name, path in info["paths"].items():
        assert path == os.path.join(package, "metrics", name)
        assert os.path.isfile(os.path.join(path, f"{name}.py"))
    for name in {n for n, _ in repo_checkpoint_files()}:
        assert info["checkpoints"][name] == os.path.join(package, "_checkpoints", name)
    # Only the dependency folders listed in the .pth file may lie inside the checkout (its .venv).
    deps = set(dependency_dirs())
    root = os.path.realpath(ROOT)
    leaked = [p for p in info["path"] if p and p not in deps and (os.path.realpath(p) + os.sep).startswith(root + os.sep)]
    assert not leaked, f"checkout paths on sys.path of the fresh venv: {leaked}"

    # d2t-metrics list: every metric, with the packaged checkpoints as default models.
    script = os.path.join(bin_dir(venv), "d2t-metrics")
    listed = run([script, "list"], work, env).stdout
    rows = dict(line.split("\t") for line in listed.strip().splitlines())
    assert sorted(rows) == repo_metrics()
    for name in {n for n, _ in repo_checkpoint_files()}:
        assert rows[name] == os.path.join(package, "_checkpoints", name)
    assert rows["parent"] == "-"

    # d2t-metrics score with PARENT (no model).
    n_examples = sum(1 for line in open(EXAMPLES, encoding="utf-8") if line.strip())
    proc = run([script, "score", "--metrics", "parent", "--input", "examples.jsonl", "--output", "parent.jsonl", "--no-progress", "--json"],
               work, env)
    assert 0.0 < json.loads(proc.stdout)["parent"]["f1"] <= 1.0
    lines = [json.loads(line) for line in open(work / "parent.jsonl", encoding="utf-8")]
    assert len(lines) == n_examples and all("score" in row["parent"] for row in lines)

    # The model-based metrics on the packaged checkpoints (offline).
    proc = run([script, "score", "--metrics", "nli_semantic_accuracy,dae", "--input", "examples.jsonl", "--output", "models.jsonl",
                "--no-progress", "--json"], work, env)
    for name in ("nli_semantic_accuracy", "dae"):
        assert f"running {name} with model {os.path.join(package, '_checkpoints', name)}" in proc.stderr, proc.stderr
    scores = json.loads(proc.stdout)
    assert 0.0 <= scores["nli_semantic_accuracy"]["ok_rate"] <= 1.0 and 0.0 < scores["dae"]["score"] <= 1.0
    lines = [json.loads(line) for line in open(work / "models.jsonl", encoding="utf-8")]
    assert len(lines) == n_examples and all({"nli_semantic_accuracy", "dae"} <= set(row) for row in lines)

    # d2t_metrics.load, and DAE's default checkpoint, in that venv.
    code = (
        "import json, d2t_metrics\n"
        "m = d2t_metrics.load('parent')\n"
        "r = m.compute(predictions=['Alan Bean was born in Wheeler, Texas.'], references=[['Alan Bean was born in Wheeler, Texas.']],"
        " tables=[['Alan_Bean | birthPlace | Wheeler,_Texas']])\n"
        "import importlib; from evaluate.loading import evaluation_module_factory\n"
        "mod = importlib.import_module(evaluation_module_factory(d2t_metrics.metric_path('dae')).module_path)\n"
        "try:\n    d2t_metrics.load('nope')\nexcept ValueError as e:\n    err = str(e)\n"
        "print(json.dumps({'f1': r['f1'], 'dae_default': mod.default_model_path(), 'err': err}))\n"
    )
    out = json.loads(run([python, "-c", code], work, env).stdout.strip().splitlines()[-1])
    assert 0.0 < out["f1"] <= 1.0
    assert out["dae_default"] == os.path.join(package, "_checkpoints", "dae")
    assert "unknown metric 'nope'" in out["err"] and "available: " + ", ".join(repo_metrics()) in out["err"]


@pytest.mark.slow
def test_editable_install_finds_the_checkout_folders(build, tmp_path_factory):
    """``pip install -e`` (as CI does): the package, metrics and checkpoints are those of the
    source tree, from any directory. The editable wheel is built by setuptools' backend, as pip does."""
    src, _, work = build
    if importlib.util.find_spec("setuptools") is None:
        pytest.skip("setuptools is not installed in this environment: cannot build an editable wheel offline")
    wheels = tmp_path_factory.mktemp("editable_wheel")
    backend = "import setuptools.build_meta as b; print(b.__legacy__.build_editable(%r))" % str(wheels)
    if os.path.isfile(os.path.join(str(src), "pyproject.toml")):
        backend = "import setuptools.build_meta as b; print(b.build_editable(%r))" % str(wheels)
    name = run([sys.executable, "-c", backend], src, clean_env()).stdout.strip().splitlines()[-1]
    venv = tmp_path_factory.mktemp("editable_venv") / "venv"
    python = fresh_venv(str(venv), os.path.join(str(wheels), name), work)
    env = clean_env(bin_dir(venv))
    probe = (
        "import json, d2t_metrics\n"
        "print(json.dumps({'file': d2t_metrics.__file__, 'metrics': d2t_metrics.available_metrics(),"
        " 'parent': d2t_metrics.metric_path('parent'), 'dae': d2t_metrics.checkpoint_path('dae')}))\n"
    )
    info = json.loads(run([python, "-c", probe], work, env).stdout)
    assert info["file"] == os.path.join(str(src), "d2t_metrics", "__init__.py")
    assert info["metrics"] == repo_metrics()
    assert info["parent"] == os.path.join(str(src), "metrics", "parent")
    assert info["dae"] == os.path.join(str(src), "checkpoints", "dae")
    listed = run([os.path.join(bin_dir(venv), "d2t-metrics"), "list"], work, env).stdout
    rows = dict(line.split("\t") for line in listed.strip().splitlines())
    assert sorted(rows) == repo_metrics() and rows["dae"] == os.path.join(str(src), "checkpoints", "dae")


def test_readme_functions_are_the_package_level_names():
    from d2t_metrics import linearize, verbalize

    assert linearize("Alan_Bean | birthPlace | Wheeler,_Texas") == "entity [ Alan Bean ] , birthPlace [ Wheeler , Texas ]"
    assert verbalize("Alan_Bean | birthPlace | Wheeler,_Texas") == ["Alan Bean was born in Wheeler, Texas."]
