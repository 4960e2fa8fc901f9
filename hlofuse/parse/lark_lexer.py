"""The lexer (lexer.py) as Lark's parser takes it: a `lark.lexer.Lexer` class, at module level
so that Lark's cached parser (grammar.py) names it.  Imported only where Lark is used."""

from __future__ import annotations

import lark
from lark.exceptions import UnexpectedCharacters

from .grammar import TerminalDef, tables
from .lexer import ContextualLexer


class Lexer(lark.lexer.Lexer):
    __future_interface__ = 2

    def __init__(self, lexer_conf):
        found = tables()
        self.core = ContextualLexer({t.name: TerminalDef.from_lark(t) for t in lexer_conf.terminals},
                                    lexer_conf.ignore, found.MATCHED_BY if found is not None else None)

    def lex(self, lexer_state, parser_state):
        text_slice = lexer_state.text

        def unexpected(text, pos, line, column, allowed):
            return UnexpectedCharacters(text, pos, line, column, allowed=allowed, state=parser_state)

        return self.core.lex(text_slice.text, text_slice.start, text_slice.end,
                             parser_state.parse_conf.parse_table.states, parser_state.state_stack, lark.Token,
                             unexpected)
