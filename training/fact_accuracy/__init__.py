"""Training and data preparation of fact_accuracy's learned extractors.

``train.py`` is the command (``python -m training.fact_accuracy.train
triples|relations ...``), ``triples_data.py`` and ``relation_data.py`` their
training data, ``dev_eval.py`` the extractors' P/R/F1 on WebNLG dev
(``python -m training.fact_accuracy.dev_eval``).
"""
