"""Conformance with XLA's own HLO texts (shared/corpus, see its README and MANIFEST.tsv).

* every `ok` file parses, and `loads(dumps(m)) == m`;
* every `error` file raises HloSyntaxError, except the VERSION-DEPENDENT ones listed below,
  which newer XLA accepts and so does hlofuse;
* error messages name file:line:column and say what XLA's test looks for (or, where hlofuse
  words it differently, what hlofuse says instead: both lists are exact, so a change shows);
* the round-trip cases of XLA's parser test (CreateTestCases, CreateShortTestCases) print
  back character for character;
* every module of shared/corpus/fusion parses.
"""

from __future__ import annotations

import csv
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

import hlofuse
from hlofuse import HloSyntaxError

from conftest import read_text

# Error files that hlofuse accepts, on purpose.  The corpus labels them `error` because XLA at
# the corpus commit rejected them; jaxlib 0.10.2's parser (a 2025 XLA) accepts each of them.
VERSION_DEPENDENT_ACCEPTED = {
    "xla_parser_InvalidDimLevelTypeCount.hlo":
        "fewer dim level types than dimensions in a sparse layout: newer XLA accepts it",
    "xla_parser_RejectSparseTiles.hlo":
        "tiles on a sparse layout: newer XLA accepts it",
    "xla_parser_OriginalValueWithoutShape.hlo":
        "origin={...} without a shape: the origin= syntax changed and newer XLA accepts it",
}

# Error files whose message XLA's test checks, where hlofuse's message says the same thing in
# other words (or reports the first of two defects that XLA reports in the other order).
# file -> words hlofuse's message contains instead.
WORDED_DIFFERENTLY = {
    "xla_parser_LiteralDimensionsError.hlo": "found '}'",
    "xla_parser_InvalidDimLabels_3.hlo": "expects [0-2] for its spatial dimensions",
    "xla_parser_PaddingConfigIsNotWindowPad.hlo": "malformed value of attribute window",
    "xla_parser_UnterminatedComment.hlo": "unterminated comment",
    "xla_parser_AliasingWrongIndex.hlo": "unbalanced '{' in the value of attribute input_output_alias",
    "xla_parser_AliasingShapeIndexNotNumerical.hlo": "malformed value of attribute input_output_alias",
    "xla_parser_AliasingWrongFormatNoColon.hlo": "malformed value of attribute input_output_alias",
    "xla_parser_AliasingWrongFormatTwoColons.hlo": "malformed value of attribute input_output_alias",
    "xla_parser_AliasingWrongFormatAlphaParam.hlo": "malformed value of attribute input_output_alias",
    "xla_parser_BufferDonorShapeIndexNotNumerical.hlo": "malformed value of attribute buffer_donor",
    "xla_parser_BufferDonorWrongFormatAlphaParam.hlo": "malformed value of attribute buffer_donor",
    "xla_parser_ComputationExists.hlo": "computation 'comp' is already defined (at 2:1)",
    "xla_parser_CrossComputationLookup.hlo": "instruction does not exist: aparam",
    "xla_parser_SingleOpNoShapeProducesError.hlo": "found 'f32[2,4]{1,0}'",
    "xla_parser_MultipleOpsProducesError.hlo": "expected the end of the input",
    "xla_parser_ShapeMismatchInOperand.hlo":
        "The declared operand shape f32[2,5] is not compatible with the shape of the operand instruction f32[2,2]",
    "xla_parser_TranscendentalAccuracyInvalidOp.hlo": "unbalanced '{' in the value of attribute result_accuracy",
    "xla_parser_SingleOpWithNested_NoLhs.hlo": "found 'f32[]', expected an instruction name followed by '='",
}


@dataclass(frozen=True)
class Case:
    file: str
    expect: str
    note: str

    @property
    def round_trips(self) -> bool:
        """CreateTestCases / CreateShortTestCases: XLA prints these back exactly."""
        return "round-trips exactly" in self.note

    @property
    def message_contains(self) -> str | None:
        m = re.search(r"message contains: (.*)", self.note)
        if m is None:
            return None
        text = re.split(r"; (?:VERSION-DEPENDENT|text )", m.group(1))[0]
        return text.replace("\\n", "\n").replace("\\\\", "\\")


@pytest.fixture(scope="module")
def parser_corpus(corpus_dir) -> tuple[Path, list[Case]]:
    folder = corpus_dir / "parser"
    with open(folder / "MANIFEST.tsv", encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh, delimiter="\t"))
    return folder, [Case(r["file"], r["expect"], r["note"]) for r in rows]


def _parse(folder: Path, case: Case):
    return hlofuse.loads(read_text(folder / case.file), path=case.file)


def test_every_ok_file_parses_and_reparses_from_its_print(parser_corpus):
    folder, cases = parser_corpus
    ok = [c for c in cases if c.expect == "ok"]
    failures = []
    for case in ok:
        try:
            module = _parse(folder, case)
            again = hlofuse.loads(hlofuse.dumps(module))
        except HloSyntaxError as err:
            failures.append(f"{case.file}: {err.one_line()}")
            continue
        if again != module:
            failures.append(f"{case.file}: loads(dumps(m)) != m")
    print(f"\nparser corpus: {len(ok) - len(failures)} of {len(ok)} ok files parse and re-parse")
    assert not failures, f"{len(failures)} of {len(ok)} ok files fail:\n" + "\n".join(failures)
    assert len(ok) >= 457, f"the manifest lists only {len(ok)} ok files"


def test_error_files_are_rejected_except_the_version_dependent_ones(parser_corpus):
    folder, cases = parser_corpus
    errors = [c for c in cases if c.expect == "error"]
    accepted, crashed = [], []
    for case in errors:
        try:
            _parse(folder, case)
        except HloSyntaxError:
            continue
        except Exception as err:  # noqa: BLE001 - anything else is a bug to report
            crashed.append(f"{case.file}: {type(err).__name__}: {err}")
            continue
        accepted.append(case.file)
    rejected = len(errors) - len(accepted) - len(crashed)
    print(f"\nparser corpus: {rejected} of {len(errors)} error files rejected; accepted on purpose: "
          f"{sorted(accepted)}")
    assert not crashed, "not an HloSyntaxError:\n" + "\n".join(crashed)
    assert set(accepted) == set(VERSION_DEPENDENT_ACCEPTED), (
        f"{rejected} of {len(errors)} rejected; accepted {sorted(accepted)}, "
        f"expected exactly {sorted(VERSION_DEPENDENT_ACCEPTED)}")
    for name in VERSION_DEPENDENT_ACCEPTED:
        note = next(c.note for c in errors if c.file == name)
        assert "VERSION-DEPENDENT" in note, f"{name} is not marked VERSION-DEPENDENT in the manifest"


def test_error_messages_are_located_and_say_what_xla_says(parser_corpus):
    folder, cases = parser_corpus
    checked, problems, worded = 0, [], set()
    for case in cases:
        if case.expect != "error" or case.file in VERSION_DEPENDENT_ACCEPTED:
            continue
        with pytest.raises(HloSyntaxError) as info:
            _parse(folder, case)
        err = info.value
        message = str(err)
        if message == f"{case.file}: error: the file is empty (expected an HLO module)":
            pass  # nothing to point at (Empty)
        elif err.line is None or not message.startswith(f"{case.file}:{err.line}:{err.column}: error: "):
            problems.append(f"{case.file}: not located as file:line:column: {message}")
        if err.context() and not err.context().endswith("^"):
            problems.append(f"{case.file}: context has no caret: {err.context()!r}")
        want = case.message_contains
        if want is None:
            continue
        checked += 1
        if case.file in WORDED_DIFFERENTLY:
            worded.add(case.file)
            if WORDED_DIFFERENTLY[case.file] not in message:
                problems.append(f"{case.file}: expected our words {WORDED_DIFFERENTLY[case.file]!r} in {message!r}")
            if want in message:
                problems.append(f"{case.file}: now says XLA's words {want!r}; drop it from WORDED_DIFFERENTLY")
        elif want not in message:
            problems.append(f"{case.file}: expected {want!r} in {message!r}")
    print(f"\nerror messages: {checked - len(worded)} of {checked} contain XLA's words, "
          f"{len(worded)} say it differently (listed)")
    assert not problems, "\n".join(problems)
    assert worded == set(WORDED_DIFFERENTLY), f"unused WORDED_DIFFERENTLY entries: {set(WORDED_DIFFERENTLY) - worded}"


def test_round_trip_cases_print_back_character_for_character(parser_corpus):
    folder, cases = parser_corpus
    round_trip = [c for c in cases if c.round_trips]
    different = []
    for case in round_trip:
        text = read_text(folder / case.file)
        if hlofuse.dumps(_parse(folder, case)) != text:
            different.append(case.file)
    print(f"\nround trip: {len(round_trip) - len(different)} of {len(round_trip)} print back exactly")
    assert len(round_trip) == 160, f"expected XLA's 160 round-trip cases, found {len(round_trip)}"
    assert not different, (f"{len(different)} of {len(round_trip)} do not print back exactly: "
                           + ", ".join(different))


def test_every_fusion_corpus_module_parses(corpus_dir):
    files = sorted((corpus_dir / "fusion").glob("*.hlo"))
    failures = []
    for path in files:
        try:
            hlofuse.loads(read_text(path), path=path.name)
        except HloSyntaxError as err:
            failures.append(err.one_line())
    print(f"\nfusion corpus: {len(files) - len(failures)} of {len(files)} modules parse")
    assert files, "no .hlo files in corpus/fusion"
    assert not failures, f"{len(failures)} of {len(files)} fail:\n" + "\n".join(failures)
