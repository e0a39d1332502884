"""Training and data preparation of data_questeval's offline QA and QG models.

``train.py`` is the command (``python -m training.data_questeval.train
text-qa|text-qg|synthesize|table-qa|table-qg|card ...``), ``qa_data.py``
the SQuAD QA/QG data and ``synthetic.py`` the synthetic WebNLG corpus; the
backends they train are ``metrics/data_questeval/qa.py`` and ``qg.py``.
"""
