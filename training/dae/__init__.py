"""Training and data preparation of dae (see training/__init__.py)."""
