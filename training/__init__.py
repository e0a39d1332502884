"""Training and data preparation for the project's checkpoints, one package per metric.

``training/<metric>/`` holds what builds a metric's data and trains its
checkpoints; ``metrics/<metric>/`` holds only what scores (the module its
Space and the wheel ship). Training code imports the runtime pieces it
shares with the metric from ``metrics.<metric>``; nothing under
``metrics/`` imports from here. Run the commands from the repository root,
e.g. ``python -m training.data_questeval.train text-qa --out DIR``. This
package is not in the wheel (``setup.py`` packages ``d2t_metrics`` only).
"""
