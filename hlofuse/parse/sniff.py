"""Is the input HLO text at all?  An empty file, or binary data (an executable, a compressed
dump, XLA's protobuf .pb files), gets one line that says what it is, instead of a parse
error listing everything HLO may start with, or its bytes echoed to the terminal.

Only the first 8 KiB are looked at.  A stray byte that is not UTF-8 (a Latin-1 character
in a comment or an op_name) does not make a file binary: XLA's lexer reads bytes, and hlofuse
reads such a byte as U+FFFD.
"""

from __future__ import annotations

import re

#: How much of the input is looked at.
SNIFF_BYTES = 8192
#: Binary when more than this share of the characters looked at, and at least _BAD_COUNT of
#: them, are control characters or bytes that are not UTF-8.
_BAD_SHARE = 0.01
_BAD_COUNT = 4

_MAGIC = (
    (b"\x7fELF", "an ELF executable or shared library"),
    (b"\x1f\x8b", "gzip-compressed data; decompress it first (gunzip -k FILE)"),
    (b"PK\x03\x04", "a zip archive; extract the HLO text file first"),
    (b"\xfd7zXZ\x00", "xz-compressed data; decompress it first (unxz -k FILE)"),
    (b"\x28\xb5\x2f\xfd", "zstd-compressed data; decompress it first (unzstd FILE)"),
    (b"\x93NUMPY", "a NumPy array file"),
)
_BZIP2 = b"1AY&SY"  # after `BZh` and the block size digit



def empty_input(text: str) -> bool:
    """Nothing but whitespace (stops at the first other character)."""
    return not text or text.isspace()


def empty_message(path: str | None, text: str) -> str:
    what = "file" if path and not path.startswith("<") else "input"
    how = "is empty" if not text else "holds only whitespace"
    return f"the {what} {how} (expected an HLO module)"


def binary_bytes(data: bytes) -> str | None:
    """What `data` looks like when it is not text ("an ELF executable ...", "binary data
    ..."), None when it may be HLO text."""
    head = data[:SNIFF_BYTES]
    for magic, what in _MAGIC:
        if head.startswith(magic):
            return what
    if head.startswith(b"BZh") and head[4:10] == _BZIP2:
        return "bzip2-compressed data; decompress it first (bunzip2 -k FILE)"
    nul = head.find(b"\x00")
    if nul >= 0:
        return f"binary data (a NUL byte at offset {nul})"
    text = head.decode("utf-8", errors="replace")
    if len(head) == SNIFF_BYTES and text.endswith("\ufffd"):
        text = text.rstrip("\ufffd")  # a character cut in two at the end of the window
    return _too_many_bad(text, counts_undecodable=True)


def binary_text(text: str) -> str | None:
    """The same question for text already decoded (what `hlofuse.loads` is given)."""
    head = text[:SNIFF_BYTES]
    nul = head.find("\x00")
    if nul >= 0:
        return f"binary data (a NUL character at offset {nul})"
    return _too_many_bad(head, counts_undecodable=False)


def binary_message(what: str) -> str:
    return f"not HLO text: this looks like {what}"


def _too_many_bad(text: str, counts_undecodable: bool) -> str | None:
    pattern = _BAD_OR_UNDECODABLE_RE if counts_undecodable else _BAD_RE
    bad = len(pattern.findall(text))
    if bad >= _BAD_COUNT and bad > _BAD_SHARE * len(text):
        kind = "control characters or bytes that are not UTF-8" if counts_undecodable else "control characters"
        return f"binary data ({bad} {kind} in its first {len(text)} characters)"
    return None


# Control characters that HLO text never holds (tab, line feed, vertical tab, form feed and
# carriage return it may; ESC too: terminal colour codes pasted into an op_name or a string
# are still text, which XLA's lexer reads and the terminal output escapes), and U+FFFD, which
# stands for a byte that is not UTF-8.
_BAD_RE = re.compile("[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f]")
_BAD_OR_UNDECODABLE_RE = re.compile("[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f\ufffd]")
