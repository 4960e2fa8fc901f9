"""The LALR(1) parser that reads HLO: Lark's tables for the grammar (lalr_tables.py, written by
make_tables.py), driven here, so that reading HLO imports no Lark.

It does what Lark's LALR parser does with the same tables, lexer and callbacks: shift a token,
or reduce by a rule and hand the callback (callbacks.py) the rule's children as Lark's tree
builder would (tokens of literal strings left out, the children of inlined rules spliced in).
It does not put failures in words: where it stops (a token no state accepts, text no terminal
matches, a callback's error), `parse` raises `Failed`, and diagnostics.py parses the text again
with Lark, whose errors it knows how to word; the error is then Lark's, as it always was."""

from __future__ import annotations

import functools

from .grammar import terminal_defs
from .lexer import ContextualLexer


class Failed(Exception):
    """The text does not parse here (Lark's parser says why)."""


class Token(str):
    """A token: its text, with what the callbacks and the lexer read of Lark's Token."""

    __slots__ = ("type", "start_pos", "value", "line", "column", "end_line", "end_column", "end_pos")

    def __new__(cls, type_, value, start_pos=None, line=None, column=None, end_line=None, end_column=None,
                end_pos=None):
        inst = str.__new__(cls, value)
        inst.type, inst.value, inst.start_pos, inst.line, inst.column = type_, value, start_pos, line, column
        inst.end_line, inst.end_column, inst.end_pos = end_line, end_column, end_pos
        return inst


class _Inlined(list):
    """The children of a rule Lark inlines into its parent (`_name` and the rules Lark makes
    for `x*`, `x+`, `[x]`)."""

    __slots__ = ()


def _unexpected(text, pos, line, column, allowed):
    return Failed(f"no token at line {line} column {column}")


class Parser:
    """Lark's tables and the callbacks, bound once per process (`parser`)."""

    def __init__(self, tables, callbacks):
        self.states = tables.STATES
        self.start_states, self.end_states = tables.START_STATES, tables.END_STATES
        self.lexer = ContextualLexer(terminal_defs(), tables.IGNORE, tables.MATCHED_BY)
        # Per rule: (its nonterminal, how many values it pops, what to do with them).
        self.rules = []
        for origin, size, name, keep, expand1 in tables.RULES:
            method = getattr(callbacks, name, None)
            if method is None:
                if not origin.startswith("_"):
                    method = _no_callback(name)  # Lark would build a lark.Tree: not for this parser
                else:
                    method = _Inlined
            self.rules.append((origin, size, _reducer(method, keep, expand1)))

    def parse(self, text: str, start: str, begin: int = 0, end: int | None = None):
        """What the callbacks make of text[begin:end] read from the start symbol `start`."""
        states, rules = self.states, self.rules
        state_stack = [self.start_states[start]]
        value_stack: list = []
        end_state = self.end_states[start]
        push_state, push_value = state_stack.append, value_stack.append
        tokens = self.lexer.lex(text, begin, len(text) if end is None else end, states, state_stack, Token,
                                _unexpected)
        last = None
        for token in tokens:
            last = token
            kind = token.type
            while True:
                action = states[state_stack[-1]].get(kind)
                if action is None:
                    raise Failed(f"unexpected {kind} at line {token.line} column {token.column}")
                if action >= 0:
                    push_state(action)
                    push_value(token)
                    break
                origin, size, reduce = rules[-1 - action]
                if size:
                    children = value_stack[-size:]
                    del state_stack[-size:]
                    del value_stack[-size:]
                else:
                    children = []
                push_value(reduce(children))
                push_state(states[state_stack[-1]][origin])
        while True:  # the end of the input: reduce until the start symbol is accepted
            action = states[state_stack[-1]].get("$END")
            if action is None or action >= 0:
                where = f" after line {last.line}" if last is not None else ""
                raise Failed(f"unexpected end of input{where}")
            origin, size, reduce = rules[-1 - action]
            if size:
                children = value_stack[-size:]
                del state_stack[-size:]
                del value_stack[-size:]
            else:
                children = []
            push_value(reduce(children))
            push_state(states[state_stack[-1]][origin])
            if state_stack[-1] == end_state:
                return value_stack[-1]


def _no_callback(name: str):
    def fail(children):
        raise Failed(f"no callback for rule {name}")

    return fail


def _reducer(method, keep, expand1):
    """The rule's callback applied to its children as Lark's tree builder hands them over:
    `keep` lists (index, inlined) of the children kept (None: all, none inlined); `expand1`
    (a `?rule`): a lone child stands for the rule."""
    if keep is not None:
        if any(inlined for _, inlined in keep):
            def select(children):
                kept = []
                for i, inlined in keep:
                    if inlined:
                        kept += children[i]
                    else:
                        kept.append(children[i])
                return kept
        else:
            indices = tuple(i for i, _ in keep)

            def select(children):
                return [children[i] for i in indices]

        if expand1:
            def reduce(children):
                kept = select(children)
                return kept[0] if len(kept) == 1 else method(kept)
        else:
            def reduce(children):
                return method(select(children))
        return reduce
    if expand1:
        def reduce_one(children):
            return children[0] if len(children) == 1 else method(children)
        return reduce_one
    return method


@functools.lru_cache(maxsize=1)
def parser() -> Parser | None:
    """The parser of this process, or None where the tables do not fit the grammar (then Lark's
    parser reads everything: grammar.parser)."""
    from .callbacks import Callbacks
    from .grammar import tables

    found = tables()
    return Parser(found, Callbacks()) if found is not None else None
