"""Text from a dump, made safe for a terminal.

A dump is data from elsewhere: its strings (op_name, source_file, custom_call_target, a syntax
error's source line, and every reason that quotes them) may hold control characters, and an
escape sequence printed as it is can retitle the window, hide text or move the cursor.  In
human output they are shown as visible escapes (`\\x1b`); JSON needs nothing (the encoder
escapes them), nor CSV and HTML (read by programs, which do not interpret them).  Text put into
rich markup is also markup-escaped, so that a name or path with `[...]` is printed as it is
instead of being read as a style (or raising rich's MarkupError).
"""

from __future__ import annotations

import functools
import re

# C0 controls but tab, DEL, C1 controls (0x9b is CSI on terminals that read 8-bit codes), and
# the invisible Unicode formatting characters that reorder or hide text (bidi overrides and
# isolates, zero-width characters, line and paragraph separators, the byte-order mark).
_INVISIBLE = "\u200b-\u200f\u2028-\u202e\u2060-\u2069\ufeff"
_CONTROLS = re.compile(f"[\x00-\x08\x0a-\x1f\x7f-\x9f{_INVISIBLE}]")
_CONTROLS_BUT_NEWLINE = re.compile(f"[\x00-\x08\x0b-\x1f\x7f-\x9f{_INVISIBLE}]")


def _visible(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str, *, keep_newlines: bool = False) -> str:
    """`text` with control characters (newlines too, unless kept) written as `\\xNN`."""
    pattern = _CONTROLS_BUT_NEWLINE if keep_newlines else _CONTROLS
    return pattern.sub(_visible, text)


def markup(text) -> str:
    """Dump-derived text (any value, str() taken) to put inside rich markup: printable and
    markup-escaped."""
    from rich.markup import escape

    return escape(printable(str(text)))


def safe_console(**options):
    """A rich Console (with these options) that shows the control characters of every string
    it renders as escapes: the last line of defence, as text from a dump should also go
    through `markup`.  Text objects built by hand are not covered."""
    return _safe_console_class()(**options)


@functools.lru_cache(maxsize=None)
def _safe_console_class():
    from rich.console import Console  # rich loads in some 50 ms: only when printing

    class SafeConsole(Console):
        def render_str(self, text: str, **kwargs):
            return super().render_str(printable(text, keep_newlines=True), **kwargs)

    return SafeConsole
