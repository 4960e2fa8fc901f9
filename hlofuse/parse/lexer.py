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

from .reader import READERS, prefilter


#: How many tokens a scanner reads trying its terminals one by one (`_Scanner.first_match`)
#: before it compiles the pattern that holds them all (a module's header: some five tokens).
_TRIES_BEFORE_COMPILING = 16


class _Scanner:
    """What the lexer reads in one set of parser states: the terminals they accept, in the order
    they are tried (`alternatives`: name, regular expression).

    One pattern holding them all (`pattern`, compiled as `regex`) reads a token with one match,
    but it is some 17k characters and 35 ms to compile, and most scanners of a dump read a token
    or two (the module's header; the computations are read by a reader).  So the first few
    tokens are read by trying the terminals one at a time, in the same order (the first that
    matches is the one the alternation would pick: nothing follows it in the pattern), each
    compiled alone once and shared by every scanner (`terminals`: name -> compiled pattern);
    the whole pattern is compiled only for a scanner that reads more (`compiled`)."""

    __slots__ = ("pattern", "regex", "alternatives", "terminals", "tries", "keywords", "allowed", "readers")

    def __init__(self, alternatives, pattern, terminals, keywords, allowed, readers):
        self.alternatives, self.pattern, self.tries = alternatives, pattern, 0
        self.regex: re.Pattern | None = None
        self.terminals = terminals
        self.keywords, self.allowed, self.readers = keywords, allowed, readers

    def compiled(self):
        if self.regex is None and self.pattern is not None:
            self.regex = re.compile(self.pattern)
        return self.regex

    def first_match(self, text: str, at: int, end: int):
        """(terminal name, match) of the first terminal that matches at `at`, or None."""
        self.tries += 1
        terminals = self.terminals
        for name, regexp in self.alternatives:
            check = prefilter(name)
            if check is not None and check.match(text, at, end) is None:
                continue  # (the terminal cannot match here: not compiled for nothing)
            compiled = terminals.get(name)
            if compiled is None:
                compiled = terminals[name] = re.compile(regexp)
            m = compiled.match(text, at, end)
            if m is not None:
                return name, m
        return None


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
        self.compiled_terminals: dict = {}  # terminal name -> its pattern compiled alone

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
        pattern = f"{self.skip}(?:{body})" if body else None
        allowed = frozenset(t.name for t in terms) | {n for n, _ in readers}
        return _Scanner(tuple((t.name, t.regexp) for t in alternatives), pattern, self.compiled_terminals, keywords,
                        allowed, readers)

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
            regex = scanner.regex
            if regex is not None:
                m = regex.match(text, pos, end)
                if m is not None:
                    kind = m.lastgroup
                    start, value, stop = m.start(kind), m.group(kind), m.end()
            elif scanner.pattern is None:
                m = None
            else:
                # No terminal matches empty text: at the end of the input (ignored text aside)
                # nothing can match, and nothing need be compiled.
                at = self.skip_re.match(text, pos, end).end() if self.skip else pos
                if at >= end:
                    return
                if scanner.tries < _TRIES_BEFORE_COMPILING:
                    found = scanner.first_match(text, at, end)
                    m = None
                    if found is not None:
                        kind, m = found
                        start, value, stop = at, m.group(), m.end()
                else:
                    m = scanner.compiled().match(text, pos, end)
                    if m is not None:
                        kind = m.lastgroup
                        start, value, stop = m.start(kind), m.group(kind), m.end()
            if m is None:
                at = self.skip_re.match(text, pos, end).end() if self.skip else pos
                if at >= end:
                    return
                n = count("\n", pos, at)
                if n:
                    line += n
                    line_start = rfind("\n", pos, at) + 1
                raise unexpected(text, at, line, at - line_start + 1, scanner.allowed)
            n = count("\n", pos, start)
            if n:
                line += n
                line_start = rfind("\n", pos, start) + 1
            pos = stop
            token = Token(scanner.keywords.get(value, kind), value, start, line, start - line_start + 1,
                          None, None, pos)
            n = count("\n", start, pos)
            if n:
                line += n
                line_start = rfind("\n", start, pos) + 1
            yield token


