"""Training and data preparation of nli_semantic_accuracy (see training/__init__.py)."""
