"""Word tokenizers shared by the n-gram metrics (PARENT and friends).

Two named tokenizers, both lowercasing first:

* ``"whitespace"``: ``text.lower().split()``, what the reader of the PARENT
  reference implementation (google-research/language ``table_text_eval``) does;
* ``"nltk"``: ``nltk.word_tokenize(text.lower(), preserve_line=True)``, the
  NLTK Treebank tokenizer without sentence splitting, so it needs no ``punkt``
  download. This is how the project's golden PARENT values were tokenized.

:func:`get_tokenizer` turns a name or any ``str -> list of str`` callable into
a tokenizer; :class:`MemoTokenizer` remembers the tokens of strings it has
seen, because evaluation sets repeat strings a lot (each E2E reference is
scored against the outputs of 21 systems).
"""

from __future__ import annotations

from typing import Callable, Dict, List, Sequence, Tuple, Union

WHITESPACE = "whitespace"
NLTK = "nltk"
TOKENIZERS = (WHITESPACE, NLTK)

Tokenizer = Callable[[str], Sequence[str]]


def whitespace_tokenize(text: str) -> List[str]:
    """Lowercase and split on whitespace (the PARENT reference reader's tokenizer)."""
    return text.lower().split()


def nltk_tokenize(text: str) -> List[str]:
    """Lowercase and tokenize with NLTK's Treebank word tokenizer, no sentence splitting.

    Identical to ``nltk.word_tokenize(text.lower(), preserve_line=True)``; NLTK is
    imported on first use only.
    """
    try:
        from nltk.tokenize import word_tokenize  # lazy: nltk, optional (the parent extra) and slow to import
    except ImportError as error:  # pragma: no cover - depends on the environment
        raise ImportError("tokenizer='nltk' needs NLTK: pip install nltk") from error
    return word_tokenize(text.lower(), preserve_line=True)


_NAMED = {WHITESPACE: whitespace_tokenize, NLTK: nltk_tokenize}


def get_tokenizer(tokenizer: Union[str, Tokenizer, None] = WHITESPACE) -> Tokenizer:
    """A tokenizer from a name (``"whitespace"``, ``"nltk"``) or a callable (returned as is).

    ``None`` means ``"whitespace"``. Callables take a string and return a list of
    tokens; they do their own lowercasing.
    """
    if tokenizer is None:
        return whitespace_tokenize
    if isinstance(tokenizer, str):
        try:
            return _NAMED[tokenizer.lower()]
        except KeyError:
            raise ValueError(f"unknown tokenizer {tokenizer!r}; use one of {list(TOKENIZERS)} or a callable") from None
    if callable(tokenizer):
        return tokenizer
    raise ValueError(f"tokenizer must be a name {list(TOKENIZERS)} or a callable, got {type(tokenizer).__name__}")


class MemoTokenizer:
    """Wraps a tokenizer and remembers the tokens of every string it has seen.

    Returns tuples, so results are hashable and cannot be changed by callers.
    Meant to live for one metric call: the memo grows with the distinct strings.
    """

    def __init__(self, tokenizer: Union[str, Tokenizer, None] = WHITESPACE):
        self.tokenize = get_tokenizer(tokenizer)
        self.memo: Dict[str, Tuple[str, ...]] = {}

    def __call__(self, text: str) -> Tuple[str, ...]:
        tokens = self.memo.get(text)
        if tokens is None:
            out = self.tokenize(text)
            if isinstance(out, str) or not all(isinstance(t, str) for t in out):
                raise ValueError(f"the tokenizer must return a list of strings, got {out!r} for {text!r}")
            tokens = self.memo[text] = tuple(out)
        return tokens
