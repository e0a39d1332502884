"""PARENT-C's co-occurrence counts, learned offline by ``python -m training.parent.cooccurrence``
(the metric reads them with ``metrics/parent/counts.py``)."""
