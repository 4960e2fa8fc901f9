"""The lexer: Lark's contextual lexer, rebuilt for speed.

Like Lark's contextual lexer, it matches only the terminals the parser accepts in its
current state, tried in Lark's order (priority, then regular expressions before literal
strings), and keywords (`ROOT`, `ENTRY`, ...) that a regular expression also matches are
told apart by a dictionary.  What differs is the cost per token: one regular expression per
parser state holds every terminal as a named group *and* the ignored text before it
(whitespace, comments), so one C-level match yields the next token; lines are counted with
str.count over the skipped text instead of per character.

The lexer itself needs no Lark: it serves lalr.py's parser, and Lark's through the adapter in
lark_lexer.py (where Lark is used: stale tables, and the diagnostics of a failed parse).
"""

from __future__ import annotations

import re

from .reader import READERS


class _Scanner:
    __slots__ = ("regex", "keywords", "allowed", "readers")

    def __init__(self, regex, keywords, allowed, readers):
        self.regex, self.keywords, self.allowed, self.readers = regex, keywords, allowed, readers


class ContextualLexer:
    """Tokens for an LALR parser that keeps its state stack in a list (`lex`)."""

    def __init__(self, terminals, ignore, matched_by=None):
        """`terminals`: grammar.TerminalDef by name; `ignore`: the names of ignored terminals;
        `matched_by`: for each literal-string terminal, the regular expression terminals that
        match its text (lalr_tables.MATCHED_BY), else worked out here."""
        self.terminals = terminals
        self.matched_by = matched_by
        ignored = "|".join(self.terminals[name].regexp for name in sorted(ignore))
        # Atomic (a lookahead, then a back reference to what it matched): once skipped, ignored
        # text is never backtracked into, or a token could start inside a comment.
        self.skip = f"(?=(?P<_skipped>(?:{ignored})*))(?P=_skipped)" if ignored else ""
        self.skip_re = re.compile(self.skip)
        self.ignore = frozenset(ignore)
        self.by_state: dict = {}  # parser state -> _Scanner
        self.by_accepts: dict = {}  # frozenset of terminal names -> _Scanner (states share them)

    def scanner(self, state: int, accepts) -> _Scanner:
        key = frozenset(accepts)
        found = self.by_accepts.get(key)
        if found is None:
            found = self.by_accepts[key] = self._build(key)
        self.by_state[state] = found
        return found

    def _build(self, accepts) -> _Scanner:
        terms = [self.terminals[n] for n in accepts if n in self.terminals and n not in self.ignore]
        regexps = [t for t in terms if t.kind == "re"]
        keywords, alternatives = {}, []
        readers = tuple((t.name, READERS[t.name]) for t in terms if t.name in READERS)
        terms = [t for t in terms if t.name not in READERS]
        for t in terms:
            if t.kind == "str" and self._matched_by_regexp(t, regexps):
                keywords[t.value] = t.name  # matched by a regexp, then retyped (Lark's `unless`)
            else:
                alternatives.append(t)
        alternatives.sort(key=lambda t: (-t.priority, t.kind != "re", -len(t.regexp), t.name))
        body = "|".join(f"(?P<{t.name}>{t.regexp})" for t in alternatives)
        regex = re.compile(f"{self.skip}(?:{body})") if body else None
        return _Scanner(regex, keywords, frozenset(t.name for t in terms) | {n for n, _ in readers}, readers)

    def _matched_by_regexp(self, t, regexps) -> bool:
        if self.matched_by is not None:
            names = self.matched_by.get(t.name, ())
            return any(r.name in names for r in regexps)
        return any(re.fullmatch(r.regexp, t.value) for r in regexps)

    def lex(self, text: str, pos: int, end: int, states, state_stack: list, Token, unexpected):
        """The tokens of text[pos:end], each read in the parser state on top of `state_stack`
        (which the parser changes between tokens); `states[state]` is what that state accepts.
        `Token(type, value, start_pos, line, column, end_line, end_column, end_pos)` makes a
        token; `unexpected(text, pos, line, column, allowed)` the error where none fits."""
        by_state = self.by_state
        line = text.count("\n", 0, pos) + 1
        line_start = text.rfind("\n", 0, pos) + 1
        count, rfind = text.count, text.rfind
        while True:
            state = state_stack[-1]
            scanner = by_state.get(state) or self.scanner(state, states[state])
            if scanner.readers:
                at = self.skip_re.match(text, pos, end).end() if self.skip else pos
                n = count("\n", pos, at)
                if n:
                    line += n
                    line_start = rfind("\n", pos, at) + 1
                pos = at
                token = None
                for kind, reader in scanner.readers:
                    found = reader(text, pos, end, line, line_start)
                    if found is not None:
                        value, stop = found
                        nl = text.find("\n", pos, stop)
                        token = Token(kind, text[pos:stop if nl < 0 else nl], pos, line, pos - line_start + 1,
                                      None, None, stop)
                        n = count("\n", pos, stop)
                        if n:
                            line += n
                            line_start = rfind("\n", pos, stop) + 1
                        pos = stop
                        # What the reader made of it (the text is only for messages): the
                        # computations it reads one after another, as one token.  The parser
                        # would take the next one as its next token all the same (wherever a
                        # computation is, another may follow), and the reader fails where
                        # anything else comes, an attribute after the `}` included.
                        values = [value]
                        while True:
                            at = self.skip_re.match(text, pos, end).end() if self.skip else pos
                            n = count("\n", pos, at)
                            at_line, at_start = (line + n, rfind("\n", pos, at) + 1) if n else (line, line_start)
                            found = reader(text, at, end, at_line, at_start) if at < end else None
                            if found is None:
                                break
                            value, stop = found
                            values.append(value)
                            n = count("\n", at, stop)
                            line, line_start = (at_line + n, rfind("\n", at, stop) + 1) if n else (at_line, at_start)
                            pos = stop
                        token.value = values
                        token.end_pos = pos
                        break
                if token is not None:
                    yield token
                    continue
            m = scanner.regex.match(text, pos, end) if scanner.regex is not None else None
            if m is None:
                at = self.skip_re.match(text, pos, end).end() if self.skip else pos
                if at >= end:
                    return
                n = count("\n", pos, at)
                if n:
                    line += n
                    line_start = rfind("\n", pos, at) + 1
                raise unexpected(text, at, line, at - line_start + 1, scanner.allowed)
            kind = m.lastgroup
            start = m.start(kind)
            n = count("\n", pos, start)
            if n:
                line += n
                line_start = rfind("\n", pos, start) + 1
            value = m.group(kind)
            pos = m.end()
            token = Token(scanner.keywords.get(value, kind), value, start, line, start - line_start + 1,
                          None, None, pos)
            n = count("\n", start, pos)
            if n:
                line += n
                line_start = rfind("\n", start, pos) + 1
            yield token


