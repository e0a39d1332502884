"""Text from users is data, never control: the texts and table values a metric scores must not
act as a tokenizer's special tokens or hide characters that change what a model reads.

Three tools, used wherever user text meets a model:

* :func:`plain_text` drops the characters that carry no words but change how text is read:
  C0/C1 control characters (NUL included; tab and newline are kept), zero-width characters
  (joiners only where they join nothing a reader sees), bidirectional embeddings, overrides
  and isolates, Unicode tag characters and the byte-order mark. A text that hides
  ``\\u202e`` or ``\\u200b`` between its words is scored as the words a reader sees.
* :func:`literal_tokenizer` makes a Hugging Face tokenizer read ``[SEP]``, ``</s>`` or
  ``<|im_start|>`` inside a text as characters (``split_special_tokens``); the special tokens the
  model needs are still added by ``add_special_tokens`` and by id, never by string.
* :func:`escape_special_strings` is for the one case where a prompt must hold a special token
  as a string (QuestEval's T5 models read a literal ``</s>`` between question and context): the
  user's part is escaped first, so that only the template's separator is special.
"""

from __future__ import annotations

import re
from typing import Iterable

# C0 controls but tab, newline and carriage return; DEL and C1 controls; zero-width space,
# left-to-right and right-to-left marks; bidi embeddings and overrides (U+202A–U+202E); word
# joiner and invisible operators (U+2060–U+2064); bidi isolates and deprecated format
# characters (U+2066–U+206F); the byte-order mark; interlinear annotation marks; Unicode tag
# characters (U+E0000–U+E007F: invisible, able to spell out hidden text). The zero-width
# non-joiner and joiner (U+200C, U+200D) shape what is seen between two non-ASCII characters
# (Persian words, emoji sequences) and are kept there; next to ASCII they only hide a break.
_INVISIBLE = re.compile(
    "[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u200b\u200e\u200f\u202a-\u202e\u2060-\u2064\u2066-\u206f"
    "\ufeff\ufff9-\ufffb\U000e0000-\U000e007f]"
    "|(?<![^\x00-\x7f])[\u200c\u200d]|[\u200c\u200d](?![^\x00-\x7f])"
)


# The control strings of the common tokenizers (BERT's, T5's and RoBERTa's, the chat models'):
# the words a text may hold to pose as one. CONTROL_STRINGS lists them; CONTROL_TOKEN also
# matches any ``<|name|>``.
CONTROL_STRINGS = ("[CLS]", "[SEP]", "[MASK]", "[PAD]", "[UNK]", "<s>", "</s>", "<pad>", "<unk>", "<mask>",
                   "<|endoftext|>", "<|im_start|>", "<|im_end|>")
CONTROL_TOKEN = re.compile(r"<\|[\w.-]{0,40}\|>|</?s>|<(?:pad|unk|mask)>|\[(?:SEP|CLS|MASK|PAD|UNK)\]")


def plain_text(text: str) -> str:
    """``text`` without invisible control characters (see the module docstring); everything
    a reader sees is kept, as it is."""
    return _INVISIBLE.sub("", text)


def has_invisible(text: str) -> bool:
    """Whether :func:`plain_text` would change ``text``."""
    return _INVISIBLE.search(text) is not None


def literal_tokenizer(tokenizer):
    """``tokenizer``, set to read special-token strings in its input as plain characters
    (``[SEP]`` → ``[``, ``sep``, ``]``). Returned for chaining; changes the object in place."""
    if tokenizer is not None and hasattr(tokenizer, "split_special_tokens"):
        tokenizer.split_special_tokens = True
    return tokenizer


def special_strings(tokenizer) -> list:
    """The strings that ``tokenizer`` would read as special tokens, longest first."""
    found = set(getattr(tokenizer, "all_special_tokens", None) or [])
    for token in (getattr(tokenizer, "added_tokens_decoder", None) or {}).values():
        if getattr(token, "special", False):
            found.add(str(token))
    return sorted((s for s in found if s), key=len, reverse=True)


def escape_special_strings(text: str, specials: Iterable[str]) -> str:
    """``text`` with each special-token string in ``specials`` broken by a space after its first
    character (``</s>`` → ``< /s>``), so that a tokenizer reading the whole prompt with its special
    strings live cannot find one in the user's part."""
    for special in specials:
        if len(special) > 1 and special in text:
            text = text.replace(special, special[0] + " " + special[1:])
    return text
