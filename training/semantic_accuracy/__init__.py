"""Fitting the combination weights of ``metrics/semantic_accuracy`` (``python -m training.semantic_accuracy.fit``)."""
