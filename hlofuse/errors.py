"""Every error hlofuse raises derives from HlofuseError; each kind carries its CLI exit code."""

from __future__ import annotations

from .terminal import printable

# Exit codes of the `hlofuse` command (named, so scripts can rely on them).
EXIT_OK = 0
EXIT_USAGE = 2  # click's own code for bad options
EXIT_SYNTAX = 3
EXIT_RULE = 4
EXIT_BACKEND = 5
EXIT_INPUT = 6
EXIT_EXECUTE = 7
EXIT_USER_CODE = 8
EXIT_XLA_COMPILE = 9
EXIT_GATE = 10  # explain --fail-on: a group of boundaries matched (the report is printed)


class HlofuseError(Exception):
    """Base class of every error hlofuse raises on purpose."""

    exit_code = EXIT_INPUT

    def one_line(self) -> str:
        """The error as the single line the CLI prints (control characters escaped)."""
        return printable(f"error: {self}")


class HloSyntaxError(HlofuseError):
    """HLO text that XLA would reject: a syntax error or a semantic one found while parsing
    (undefined operand, duplicate name, missing ENTRY, called computation not found, ...)."""

    exit_code = EXIT_SYNTAX

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        column: int | None = None,
        source_line: str | None = None,
        found: str | None = None,
        expected: tuple[str, ...] = (),
    ):
        super().__init__(message)
        self.message = message
        self.path = path
        self.line = line
        self.column = column
        self.source_line = source_line
        self.found = found
        self.expected = expected

    def located(self, path: str | None) -> "HloSyntaxError":
        """The same error, naming the file it came from."""
        self.path = path
        return self

    def __str__(self) -> str:
        where = self.path or "<string>"
        if self.line is not None:
            where += f":{self.line}"
            if self.column is not None:
                where += f":{self.column}"
        return f"{where}: error: {self.message}"

    def one_line(self) -> str:
        return printable(str(self))

    def context(self) -> str:
        """The offending source line with a caret under the column (empty when unknown).
        Characters a terminal would act on are escaped, the caret moved to match."""
        if self.source_line is None or self.column is None:
            return ""
        line = self.source_line.rstrip("\r\n").expandtabs(1)
        before = max(self.column - 1, 0)
        caret = " " * len(printable(line[:before])) + "^"
        return f"{printable(line)}\n{caret}"


class HloVerifierError(HloSyntaxError):
    """HLO text that parses but that XLA's verifier would reject (an instruction whose shape
    does not follow from its operands, a fusion that does not fit its computation, ...);
    found before a replay or an explanation, at the instruction's line and column."""


class InputError(HlofuseError):
    """A file, folder or stage that cannot be read or found."""

    exit_code = EXIT_INPUT


class OutputError(HlofuseError):
    """An output file (-o, --csv, --html) that cannot or must not be written: its folder is
    missing, it is the input, a folder or a link.  Input's exit code: the command was given
    paths it cannot use."""

    exit_code = EXIT_INPUT


class OptionError(HlofuseError):
    """Options that contradict each other, name nothing known, or do not apply to this input
    (`--relax` on a module that is not replayed, `--plan loop` on a module without a loop):
    found before any work, reported with the usage exit code."""

    exit_code = EXIT_USAGE


class UnknownRuleRef(HlofuseError):
    """A rule id, name, tag or glob that matches no rule."""

    exit_code = EXIT_RULE


class NotRelaxable(HlofuseError):
    """A rule that protects correctness was asked to be relaxed."""

    exit_code = EXIT_RULE


class BackendUnavailable(HlofuseError):
    """The requested device or backend (e.g. CUDA) is not available here."""

    exit_code = EXIT_BACKEND


class ExecutionError(HlofuseError):
    """An HLO module could not be evaluated or compiled to kernels."""

    exit_code = EXIT_EXECUTE


class UserCodeError(HlofuseError):
    """The user's Python code failed while hlofuse compiled it: importing their script,
    making the example arguments, or JAX tracing or lowering their function.  Told at the
    user's file and line (`path`, `line`), not as a failure of hlofuse."""

    exit_code = EXIT_USER_CODE

    def __init__(self, message: str, *, path: str | None = None, line: int | None = None,
                 function: str | None = None, details: str | None = None):
        super().__init__(message)
        self.message = message
        self.path = path
        self.line = line
        self.function = function
        self.details = details  # the whole error text and traceback, for those who ask

    def __str__(self) -> str:
        if self.path is None:
            return f"error: {self.message}"
        where = self.path if self.line is None else f"{self.path}:{self.line}"
        return f"{where}: error: {self.message}"

    def one_line(self) -> str:
        return printable(str(self))


class XlaCompileError(HlofuseError):
    """XLA refused to compile the program, or the process compiling it died."""

    exit_code = EXIT_XLA_COMPILE
