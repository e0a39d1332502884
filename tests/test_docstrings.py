"""Every metric's docstring examples run, the way evaluate's own test suite
runs them (tests/test_metric_common.py in huggingface/evaluate): the module is
imported through evaluate's loader, ``evaluate.load`` is patched to load local
modules, and ``doctest.testmod`` runs with ``raise_on_error``, here from a
directory outside the checkout so that no example leans on relative paths."""

import doctest
import importlib
import inspect
import os
from unittest import mock

import evaluate
import pytest

from d2t_metrics import available_metrics, metric_path


@pytest.mark.parametrize("name", available_metrics())
def test_docstring_examples_run_under_evaluates_harness(name, tmp_path, monkeypatch):
    from evaluate.loading import evaluation_module_factory, import_main_class

    module = importlib.import_module(evaluation_module_factory(metric_path(name)).module_path)
    metric_class = import_main_class(module.__name__)
    # evaluate's harness refuses **kwargs in _compute: every option must be named.
    parameters = inspect.signature(metric_class._compute).parameters.values()
    assert all(p.kind != p.VAR_KEYWORD for p in parameters)

    real_load = evaluate.load

    def load_local(path, *args, **kwargs):  # what evaluate's use_local_metrics() does
        return real_load(os.path.join(os.path.dirname(metric_path(name)), path), *args, **kwargs)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("D2T_NO_PROGRESS", "1")
    with mock.patch("evaluate.load", side_effect=load_local):
        try:
            results = doctest.testmod(module, verbose=False, raise_on_error=True, optionflags=doctest.ELLIPSIS)
        except doctest.UnexpectedException as e:
            raise e.exc_info[1]
        except doctest.DocTestFailure as e:
            pytest.fail(f"{name}: {e.example.source.strip()} gave {e.got!r}, expected {e.example.want!r}")
    assert results.failed == 0
    assert results.attempted > 1
