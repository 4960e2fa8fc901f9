"""The lexer: Lark's contextual lexer, rebuilt for speed.

Like Lark's contextual lexer, it matches only the terminals the parser accepts in its
current state, tried in Lark's order (priority, then regular expressions before literal
strings), and keywords (`ROOT`, `ENTRY`, ...) that a regular expression also matches are
told apart by a dictionary.  What differs is the cost per token: one regular expression per
parser state holds every terminal as a named group *and* the ignored text before it
(whitespace, comments), so one C-level match yields the next token; lines are counted with
str.count over the skipped text instead of per character.
"""

from __future__ import annotations

import re

import lark
from lark.exceptions import UnexpectedCharacters

from .reader import READERS


class _Scanner:
    __slots__ = ("regex", "keywords", "allowed", "readers")

    def __init__(self, regex, keywords, allowed, readers):
        self.regex, self.keywords, self.allowed, self.readers = regex, keywords, allowed, readers


class Lexer(lark.lexer.Lexer):
    __future_interface__ = 2

    def __init__(self, lexer_conf):
        self.terminals = {t.name: t for t in lexer_conf.terminals}
        ignored = "|".join(self.terminals[name].pattern.to_regexp() for name in sorted(lexer_conf.ignore))
        # Atomic (a lookahead, then a back reference to what it matched): once skipped, ignored
        # text is never backtracked into, or a token could start inside a comment.
        self.skip = f"(?=(?P<_skipped>(?:{ignored})*))(?P=_skipped)" if ignored else ""
        self.skip_re = re.compile(self.skip)
        self.ignore = frozenset(lexer_conf.ignore)
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
        regexps = [t for t in terms if t.pattern.type == "re"]
        keywords, alternatives = {}, []
        readers = tuple((t.name, READERS[t.name]) for t in terms if t.name in READERS)
        terms = [t for t in terms if t.name not in READERS]
        for t in terms:
            if t.pattern.type == "str" and any(re.fullmatch(r.pattern.to_regexp(), t.pattern.value) for r in regexps):
                keywords[t.pattern.value] = t.name  # matched by a regexp, then retyped (Lark's `unless`)
            else:
                alternatives.append(t)
        alternatives.sort(key=lambda t: (-t.priority, t.pattern.type != "re", -len(t.pattern.to_regexp()), t.name))
        body = "|".join(f"(?P<{t.name}>{t.pattern.to_regexp()})" for t in alternatives)
        regex = re.compile(f"{self.skip}(?:{body})") if body else None
        return _Scanner(regex, keywords, frozenset(t.name for t in terms) | {n for n, _ in readers}, readers)

    def lex(self, lexer_state, parser_state):
        text_slice = lexer_state.text
        text, pos, end = text_slice.text, text_slice.start, text_slice.end
        states = parser_state.parse_conf.parse_table.states
        by_state = self.by_state
        Token = lark.Token
        line = text.count("\n", 0, pos) + 1
        line_start = text.rfind("\n", 0, pos) + 1
        count, rfind = text.count, text.rfind
        while True:
            state = parser_state.position
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
                raise UnexpectedCharacters(text, at, line, at - line_start + 1, allowed=scanner.allowed,
                                           state=parser_state)
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

