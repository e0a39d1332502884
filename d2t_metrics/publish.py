"""Publish the project to the Hugging Face Hub: one Space per metric folder, the
playground Space, and one model repository per project checkpoint.

::

    python -m d2t_metrics.publish --owner ORG [--commit SHA] [--github-owner USER] [--dry-run] [--json]

As huggingface/evaluate syncs its ``metrics/*`` folders to Spaces, every
``metrics/<name>/`` (a folder holding ``<name>.py``) becomes the Space
``ORG/<name>``; ``spaces/playground/`` becomes ``ORG/d2t-metrics-playground``,
staged with a copy of every metric folder under ``metrics/`` and of
``examples/examples.jsonl``; every ``checkpoints/<name>/`` becomes the model
repository ``ORG/d2t-metrics-<name>``. Each repository is created if needed
(``HfApi().create_repo(..., exist_ok=True)``, ``space_sdk="gradio"`` for Spaces)
and its content replaced by the staged folder (``upload_folder`` with
``delete_patterns="*"``: files no longer in the folder are removed).
Checkpoints go first, so that Spaces find them when they start.

Staging
    Nothing in the source tree is changed. Each repository is staged in a
    temporary folder (or under ``--staging-dir``, kept for inspection), where

    * ``requirements.txt`` has its placeholders filled: d2t-metrics is not on
      PyPI, so a Space installs it from GitHub at the published commit,
      ``d2t-metrics[<extras>] @ git+https://github.com/${D2T_METRICS_OWNER}/d2t-metrics@${D2T_METRICS_COMMIT}``
      in the source; ``--github-owner`` (default: the owner of the ``origin``
      remote when it is on GitHub, else ``--owner``) and ``--commit`` (default
      ``git rev-parse HEAD``) fill them. The placeholders use pip's
      environment-variable syntax, so a checkout can also install a metric's
      requirements directly: ``D2T_METRICS_OWNER=me D2T_METRICS_COMMIT=$(git
      rev-parse HEAD) pip install -r metrics/parent/requirements.txt``;
    * ``d2t_space.json`` is added to each Space: the GitHub repository, the
      commit, and the model repositories of the project checkpoints
      (``{"checkpoints": {"dae": "ORG/d2t-metrics-dae"}}``), where the Space's
      app finds its model when the folder has no ``checkpoints/`` beside it
      (:func:`d2t_metrics.spaces.resolve_model`).

    The commit must be pushed to GitHub before the Spaces build. Uncommitted
    changes under the published folders are reported: the Spaces would get
    the working tree's files but the package as of the commit.

``--dry-run`` stages everything and lists what would be uploaded where (each
repository id and type, every file with its size, the requirement line the
Space installs) and uploads nothing. ``huggingface_hub`` is imported only for
a real upload; it reads the token from ``HF_TOKEN`` or ``huggingface-cli login``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass, field
from typing import Dict, Iterator, List, Optional, Sequence

PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(PACKAGE_DIR)

OWNER_PLACEHOLDER = "${D2T_METRICS_OWNER}"
COMMIT_PLACEHOLDER = "${D2T_METRICS_COMMIT}"
PLACEHOLDER_PATTERN = re.compile(r"\$\{D2T_METRICS_[A-Z0-9_]+\}")
SPACE_CONFIG = "d2t_space.json"  # the name d2t_metrics.spaces reads
PLAYGROUND = "d2t-metrics-playground"
CHECKPOINT_PREFIX = "d2t-metrics-"

# Never uploaded: caches, editor and VCS droppings.
_SKIP_DIRS = {"__pycache__", ".ipynb_checkpoints", ".pytest_cache", ".git"}
_SKIP_SUFFIXES = (".pyc", ".pyo", "~", ".swp")


class PublishError(Exception):
    """A problem reported without a traceback (exit 2)."""


@dataclass
class Upload:
    """One repository to create and fill from a staged folder."""

    repo_id: str
    repo_type: str  # "space" or "model"
    source: str  # what it is made from, relative to the repository root
    folder: str  # the staged folder
    files: List[Dict[str, object]] = field(default_factory=list)  # [{"path", "size"}]
    requirement: Optional[str] = None  # the d2t-metrics line of its requirements.txt

    @property
    def space_sdk(self) -> Optional[str]:
        return "gradio" if self.repo_type == "space" else None

    def to_json(self) -> Dict[str, object]:
        return {
            "repo_id": self.repo_id, "repo_type": self.repo_type, "space_sdk": self.space_sdk, "source": self.source,
            "files": self.files, "requirement": self.requirement,
        }


# ---------------------------------------------------------------------------
# git


def _git(root: str, *args: str, strip: bool = True) -> Optional[str]:
    try:
        out = subprocess.run(["git", "-C", root, *args], capture_output=True, text=True, check=True)
    except (OSError, subprocess.CalledProcessError):
        return None
    return out.stdout.strip() if strip else out.stdout


def resolve_commit(root: str, commit: Optional[str]) -> str:
    """``commit`` as a full SHA where git can resolve it (else as given); default ``HEAD``."""
    if commit:
        if not re.fullmatch(r"[0-9A-Za-z._/-]+", commit):
            raise PublishError(f"--commit {commit!r} is not a commit id")
        return _git(root, "rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}") or commit
    head = _git(root, "rev-parse", "HEAD")
    if not head:
        raise PublishError(f"cannot run 'git rev-parse HEAD' in {root}; pass --commit SHA")
    return head


def origin_github_owner(root: str) -> Optional[str]:
    """The owner of the ``origin`` remote when it is a GitHub URL."""
    url = _git(root, "remote", "get-url", "origin") or ""
    match = re.search(r"github\.com[:/]([^/]+)/", url)
    return match.group(1) if match else None


def uncommitted(root: str, paths: Sequence[str]) -> List[str]:
    out = _git(root, "status", "--porcelain", "--", *paths, strip=False)  # "XY path": the status columns matter
    return [line[3:] for line in (out or "").splitlines() if line.strip()]


# ---------------------------------------------------------------------------
# Staging


def metric_names(root: str) -> List[str]:
    folder = os.path.join(root, "metrics")
    if not os.path.isdir(folder):
        return []
    return sorted(n for n in os.listdir(folder) if os.path.isfile(os.path.join(folder, n, f"{n}.py")))


def checkpoint_names(root: str) -> List[str]:
    folder = os.path.join(root, "checkpoints")
    if not os.path.isdir(folder):
        return []
    return sorted(
        n for n in os.listdir(folder)
        if os.path.isdir(os.path.join(folder, n)) and any(not f.startswith(".") for f in os.listdir(os.path.join(folder, n)))
    )


def _walk(folder: str) -> Iterator[str]:
    """Relative paths of the files to publish under ``folder``, sorted."""
    found = []
    for dirpath, dirnames, filenames in os.walk(folder):
        dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS and not d.startswith("."))
        for name in filenames:
            if name.startswith(".") or name.endswith(_SKIP_SUFFIXES):
                continue
            found.append(os.path.relpath(os.path.join(dirpath, name), folder))
    return iter(sorted(found, key=lambda p: p.replace(os.sep, "/")))


def _copy_tree(src: str, dst: str) -> None:
    for rel in _walk(src):
        target = os.path.join(dst, rel)
        os.makedirs(os.path.dirname(target), exist_ok=True)
        shutil.copy2(os.path.join(src, rel), target)


def fill_placeholders(text: str, github_owner: str, commit: str) -> str:
    return text.replace(OWNER_PLACEHOLDER, github_owner).replace(COMMIT_PLACEHOLDER, commit)


def _fill_requirements(folder: str, github_owner: str, commit: str) -> Optional[str]:
    """Fill ``requirements.txt`` in the staged folder; the d2t-metrics line it now has."""
    path = os.path.join(folder, "requirements.txt")
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        text = fill_placeholders(f.read(), github_owner, commit)
    left = PLACEHOLDER_PATTERN.findall(text)
    if left:
        raise PublishError(f"{path}: unknown placeholder(s) {', '.join(sorted(set(left)))}")
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    return next((line.strip() for line in text.splitlines() if line.strip().startswith("d2t-metrics")), None)


def _write_space_config(folder: str, github_owner: str, commit: str, checkpoints: Dict[str, str]) -> None:
    config = {
        "repository": f"https://github.com/{github_owner}/d2t-metrics",
        "commit": commit,
        "checkpoints": checkpoints,
    }
    with open(os.path.join(folder, SPACE_CONFIG), "w", encoding="utf-8") as f:
        json.dump(config, f, indent=2, sort_keys=True)
        f.write("\n")


def _listing(folder: str) -> List[Dict[str, object]]:
    return [{"path": rel.replace(os.sep, "/"), "size": os.path.getsize(os.path.join(folder, rel))} for rel in _walk(folder)]


def space_id(owner: str, name: str) -> str:
    return f"{owner}/{name}"


def checkpoint_repo_id(owner: str, name: str) -> str:
    return f"{owner}/{CHECKPOINT_PREFIX}{name}"


def build_plan(root: str, owner: str, commit: str, github_owner: str, staging_dir: str) -> List[Upload]:
    """Stage every repository under ``staging_dir`` and return what to upload, in upload order."""
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", owner):
        raise PublishError(f"--owner {owner!r} is not a Hub user or organization name")
    metrics = metric_names(root)
    if not metrics:
        raise PublishError(f"no metric folders (metrics/<name>/<name>.py) under {root}")
    checkpoints = {name: checkpoint_repo_id(owner, name) for name in checkpoint_names(root)}
    plan: List[Upload] = []

    for name in checkpoints:
        folder = os.path.join(staging_dir, "models", name)
        _copy_tree(os.path.join(root, "checkpoints", name), folder)
        plan.append(Upload(checkpoints[name], "model", f"checkpoints/{name}", folder))

    for name in metrics:
        folder = os.path.join(staging_dir, "spaces", name)
        _copy_tree(os.path.join(root, "metrics", name), folder)
        requirement = _fill_requirements(folder, github_owner, commit)
        own = {name: checkpoints[name]} if name in checkpoints else {}
        _write_space_config(folder, github_owner, commit, own)
        plan.append(Upload(space_id(owner, name), "space", f"metrics/{name}", folder, requirement=requirement))

    playground = os.path.join(root, "spaces", "playground")
    if os.path.isfile(os.path.join(playground, "app.py")):
        folder = os.path.join(staging_dir, "spaces", PLAYGROUND)
        _copy_tree(playground, folder)
        for name in metrics:
            _copy_tree(os.path.join(root, "metrics", name), os.path.join(folder, "metrics", name))
        sources = ["spaces/playground", "metrics/*"]
        examples = os.path.join(root, "examples", "examples.jsonl")
        if os.path.isfile(examples):
            shutil.copy2(examples, os.path.join(folder, "examples.jsonl"))
            sources.append("examples/examples.jsonl")
        requirement = _fill_requirements(folder, github_owner, commit)
        for name in metrics:  # the copied metric folders' own requirements are not used, but keep them valid
            _fill_requirements(os.path.join(folder, "metrics", name), github_owner, commit)
        _write_space_config(folder, github_owner, commit, checkpoints)
        plan.append(Upload(space_id(owner, PLAYGROUND), "space", " + ".join(sources), folder, requirement=requirement))

    for upload in plan:
        upload.files = _listing(upload.folder)
    return plan


# ---------------------------------------------------------------------------
# Output and upload


def format_plan(plan: Sequence[Upload], owner: str, github_owner: str, commit: str, dry_run: bool) -> str:
    lines = [
        f"d2t-metrics publish{' (dry run)' if dry_run else ''}: owner {owner}, "
        f"d2t-metrics installed from https://github.com/{github_owner}/d2t-metrics@{commit}",
    ]
    for upload in plan:
        total = sum(int(f["size"]) for f in upload.files)
        kind = f"{upload.repo_type} ({upload.space_sdk})" if upload.space_sdk else upload.repo_type
        lines.append(f"{kind} {upload.repo_id} <- {upload.source}: {len(upload.files)} files, {total:,} bytes")
        width = max((len(str(f["path"])) for f in upload.files), default=0)
        for f in upload.files:
            lines.append(f"    {str(f['path']).ljust(width)}  {int(f['size']):>12,}")
        if upload.requirement:
            lines.append(f"    requirement: {upload.requirement}")
    if dry_run:
        lines.append(f"dry run: nothing uploaded ({len(plan)} repositories)")
    return "\n".join(lines)


def upload_all(plan: Sequence[Upload], commit: str, private: bool = False) -> None:
    from huggingface_hub import HfApi  # lazy: huggingface_hub, only to upload (the spaces extra)

    api = HfApi()
    for upload in plan:
        print(f"d2t-metrics publish: {upload.repo_type} {upload.repo_id} ...", file=sys.stderr)
        api.create_repo(
            upload.repo_id, repo_type=upload.repo_type, space_sdk=upload.space_sdk, exist_ok=True,
            **({"private": True} if private else {}),
        )
        api.upload_folder(
            repo_id=upload.repo_id, repo_type=upload.repo_type, folder_path=upload.folder,
            commit_message=f"Sync with d2t-metrics {commit[:12]}", delete_patterns="*",
        )


@contextlib.contextmanager
def _staging(path: Optional[str]) -> Iterator[str]:
    if path:
        if os.path.exists(path) and os.listdir(path):
            raise PublishError(f"--staging-dir {path!r} exists and is not empty")
        os.makedirs(path, exist_ok=True)
        yield os.path.abspath(path)
        return
    with tempfile.TemporaryDirectory(prefix="d2t-publish-") as tmp:
        yield tmp


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m d2t_metrics.publish",
        description="Push each metric folder to its Hub Space, the playground to its Space, and each checkpoint to a model repository.",
    )
    parser.add_argument("--owner", required=True, help="Hub user or organization that owns the Spaces and model repositories")
    parser.add_argument("--commit", help="d2t-metrics commit the Spaces install (default: git rev-parse HEAD)")
    parser.add_argument("--github-owner", help="GitHub owner of the d2t-metrics repository (default: origin's owner, else --owner)")
    parser.add_argument("--root", default=REPO_ROOT, help="repository root holding metrics/, spaces/ and checkpoints/ (default: this checkout)")
    parser.add_argument("--dry-run", action="store_true", help="list what would be uploaded where, upload nothing")
    parser.add_argument("--json", action="store_true", help="print the plan as JSON")
    parser.add_argument("--staging-dir", help="stage into this (new or empty) folder and keep it (default: a temporary folder)")
    parser.add_argument("--private", action="store_true", help="create new repositories as private")
    return parser


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    root = os.path.abspath(args.root)
    try:
        commit = resolve_commit(root, args.commit)
        github_owner = args.github_owner or origin_github_owner(root) or args.owner
        dirty = uncommitted(root, ["metrics", "spaces", "checkpoints", "examples", "d2t_metrics", "setup.py"])
        if dirty:
            shown = ", ".join(dirty[:8]) + (f" and {len(dirty) - 8} more" if len(dirty) > 8 else "")
            print(
                f"d2t-metrics publish: warning: uncommitted changes ({shown}); the Spaces get these files "
                f"but install d2t-metrics as of {commit[:12]}", file=sys.stderr,
            )
        with _staging(args.staging_dir) as staging:
            plan = build_plan(root, args.owner, commit, github_owner, staging)
            if args.json:
                print(json.dumps({"owner": args.owner, "github_owner": github_owner, "commit": commit, "dry_run": args.dry_run,
                                  "staging_dir": args.staging_dir and staging, "uploads": [u.to_json() for u in plan]}, indent=2))
            else:
                print(format_plan(plan, args.owner, github_owner, commit, args.dry_run))
            if not args.dry_run:
                upload_all(plan, commit, args.private)
    except PublishError as e:
        print(f"d2t-metrics publish: error: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
