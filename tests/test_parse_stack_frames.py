"""The FileNames / FunctionNames / FileLocations / StackFrames tables of current JAX dumps, and
`attributes.source_location`, which resolves an instruction's `stack_frame_id` through them.

XLA stores a frame's parent as the parent's 1-based id (0: none) but prints it one higher, so
a root frame prints `parent_frame_id=1`.  The excerpt below is from a real dump
(sample_dumps/gpu-current-h100/rnn_scan, jax 0.10.2) of `sample_dumps/programs.py::rnn_scan`,
compiled by `sample_dumps/generate.py`: the Python stack of its while loop is
<module> (generate.py:456) -> main (generate.py:445) -> compile_one (generate.py:179) ->
rnn_scan (programs.py:258, the lax.scan call), and it prints as frames 5, 6, 7, 8 with
parent_frame_id 1, 6, 7, 8.  Read as plain ids those would make frame 6 its own parent.
"""

from __future__ import annotations

import pytest

import hlofuse
from hlofuse import attributes
from hlofuse.ir import SourceLocation

from conftest import read_text

RNN_SCAN_EXCERPT = """\
HloModule jit_rnn_scan, entry_computation_layout={(s32[])->s32[]}

FileNames
1 "sample_dumps/programs.py"
2 "sample_dumps/generate.py"

FunctionNames
1 "rnn_scan"
2 "rnn_scan.<locals>.cell"
3 "<module>"
4 "main"
5 "compile_one"

FileLocations
1 {file_name_id=1 function_name_id=1 line=258 end_line=258 column=12 end_column=38}
2 {file_name_id=1 function_name_id=2 line=255 end_line=255 column=21 end_column=29}
3 {file_name_id=1 function_name_id=2 line=255 end_line=255 column=32 end_column=40}
4 {file_name_id=1 function_name_id=2 line=255 end_line=255 column=12 end_column=45}
5 {file_name_id=2 function_name_id=3 line=456 end_line=456 column=13 end_column=19}
6 {file_name_id=2 function_name_id=4 line=445 end_line=445 column=15 end_column=77}
7 {file_name_id=2 function_name_id=5 line=179 end_line=179 column=22 end_column=82}

StackFrames
1 {file_location_id=1 parent_frame_id=1}
2 {file_location_id=2 parent_frame_id=1}
3 {file_location_id=3 parent_frame_id=1}
4 {file_location_id=4 parent_frame_id=1}
5 {file_location_id=5 parent_frame_id=1}
6 {file_location_id=6 parent_frame_id=6}
7 {file_location_id=7 parent_frame_id=7}
8 {file_location_id=1 parent_frame_id=8}
9 {file_location_id=1 parent_frame_id=9}
10 {file_location_id=1 parent_frame_id=10}


ENTRY %main.1 (i.1: s32[]) -> s32[] {
  %i.1 = s32[] parameter(0)
  %constant.7 = s32[] constant(1)
  %add.11 = s32[] add(%i.1, %constant.7), metadata={op_name="jit(rnn_scan)/while/body/add" stack_frame_id=10}
  %tanh.1 = s32[] negate(%add.11), metadata={op_name="tanh" stack_frame_id=4}
  ROOT %old = s32[] copy(%tanh.1), metadata={op_name="copy" source_file="old.py" source_line=7 stack_frame_id=4}
}

"""

PROGRAMS, GENERATE = "sample_dumps/programs.py", "sample_dumps/generate.py"
USER_STACK_OF_THE_LOOP = (
    SourceLocation(PROGRAMS, 258, "rnn_scan", 12),  # frame 10
    SourceLocation(PROGRAMS, 258, "rnn_scan", 12),  # frame 9 (jax nests the scan body's trace)
    SourceLocation(PROGRAMS, 258, "rnn_scan", 12),  # frame 8
    SourceLocation(GENERATE, 179, "compile_one", 22),
    SourceLocation(GENERATE, 445, "main", 15),
    SourceLocation(GENERATE, 456, "<module>", 13),
)


@pytest.fixture(scope="module")
def module():
    return hlofuse.loads(RNN_SCAN_EXCERPT)


def test_tables_are_read(module):
    frames = module.stack_frames
    assert frames.file_names == {1: PROGRAMS, 2: GENERATE}
    assert frames.function_names[2] == "rnn_scan.<locals>.cell"
    assert frames.file_locations[7] == (2, 5, 179, 22)


def test_an_entry_may_separate_its_id_by_a_tab():
    """The grammar reads an entry's id and value apart by spaces or tabs, as XLA's lexer skips
    either; a tab once reached int() with the value attached (an internal error)."""
    text = RNN_SCAN_EXCERPT.replace('1 "sample_dumps/programs.py"', '1\t"sample_dumps/programs.py"')
    text = text.replace("7 {file_name_id=2", "7\t {file_name_id=2")
    assert text != RNN_SCAN_EXCERPT
    frames = hlofuse.loads(text).stack_frames
    assert frames.file_names == {1: PROGRAMS, 2: GENERATE}
    assert frames.file_locations[7] == (2, 5, 179, 22)


def test_printed_parent_is_one_above_the_parents_id(module):
    frames = module.stack_frames.frames
    assert frames[5] == (5, 0), "a frame printed with parent_frame_id=1 is a root"
    assert frames[6] == (6, 5) and frames[7] == (7, 6) and frames[8] == (1, 7)
    assert all(parent < frame for frame, (_, parent) in frames.items()), "parents come before children"


def test_instruction_resolves_to_its_file_line_and_user_stack(module):
    add = module.entry["add.11"]
    assert attributes.metadata(add).stack_frame_id == 10
    assert attributes.source_location(module, add) == SourceLocation(PROGRAMS, 258, "rnn_scan", 12)
    assert module.stack_frames.chain(10) == USER_STACK_OF_THE_LOOP


def test_function_local_frames_have_no_parent(module):
    # Instructions of an inner function's computation carry the callee part of the location
    # only: `cell`, line 255, with no caller.
    tanh = module.entry["tanh.1"]
    assert attributes.source_location(module, tanh) == SourceLocation(PROGRAMS, 255, "rnn_scan.<locals>.cell", 12)
    assert module.stack_frames.chain(4) == (SourceLocation(PROGRAMS, 255, "rnn_scan.<locals>.cell", 12),)


def test_source_file_in_metadata_wins_over_the_tables(module):
    assert attributes.source_location(module, module.entry["old"]) == SourceLocation("old.py", 7)


def test_unknown_and_cyclic_frames_do_not_hang():
    text = RNN_SCAN_EXCERPT.replace("10 {file_location_id=1 parent_frame_id=10}",
                                    "10 {file_location_id=1 parent_frame_id=12}\n11 {file_location_id=1 parent_frame_id=11}")
    module = hlofuse.loads(text)
    # 10 -> 11 -> 10: a cycle (hand-made; XLA never prints one); the chain stops at the repeat.
    assert len(module.stack_frames.chain(10)) == 2
    assert module.stack_frames.chain(99) == ()
    assert module.stack_frames.location(99) is None


def test_tables_print_back_exactly(module):
    assert hlofuse.dumps(module).startswith(RNN_SCAN_EXCERPT.split("\n\n\n")[0] + "\n\n\n")
    assert hlofuse.loads(hlofuse.dumps(module)) == module


def test_on_the_real_dump_when_present(sample_dumps_dir):
    folder = sample_dumps_dir / "gpu-current-h100" / "rnn_scan"
    files = sorted(folder.glob("*.before_optimizations.txt")) if folder.is_dir() else []
    if not files:
        pytest.skip("sample_dumps/gpu-current-h100/rnn_scan is not there (being regenerated?)")
    module = hlofuse.loads(read_text(files[0]), path=str(files[0]))
    loop = next(i for _, i in module.instructions() if i.opcode == "while")
    stack = module.stack_frames.chain(attributes.metadata(loop).stack_frame_id)
    assert stack[0].file == PROGRAMS and stack[0].function == "rnn_scan"
    assert stack[-1].function == "<module>" and stack[-1].file == GENERATE
    assert [loc.function for loc in stack[-3:]] == ["compile_one", "main", "<module>"]


_TABLES = """HloModule m

FileNames
1 "a.py"
2 "b.py"

FunctionNames
1 "f"

FileLocations
1 {file_name_id=1 function_name_id=1 line=1 end_line=1 column=1 end_column=2}
2 {file_name_id=2 function_name_id=1 line=3 end_line=3 column=1 end_column=2}

StackFrames
1 {file_location_id=1 parent_frame_id=1}
2 {file_location_id=2 parent_frame_id=2}

ENTRY %e (p: f32[]) -> f32[] {
  ROOT %p = f32[] parameter(0), metadata={stack_frame_id=2}
}
"""


@pytest.mark.parametrize("old, new, where", [
    ('2 "b.py"', "2 b.py", (5, 1)),
    ("2 {file_location_id=2 parent_frame_id=2}", "2 {file_location_id=2 parent_frame_id=2", (16, 1)),
    ('1 "f"', '1 "f"\n2 {x=1}', (9, 1)),
])
def test_a_bad_table_entry_after_good_ones(old, new, where):
    """The lexer reads a table's entries one after another as one token; an entry that is not
    one ends the run, and the error is at that entry, as when each entry was a token."""
    with pytest.raises(hlofuse.HloSyntaxError) as err:
        hlofuse.loads(_TABLES.replace(old, new))
    assert (err.value.line, err.value.column) == where
    assert "an entry such as" in str(err.value)


def test_table_entries_after_a_comment_and_on_one_line():
    text = _TABLES.replace("\nFileLocations\n", "\nFileLocations\n/* c */ ").replace(
        "1 {file_location_id=1 parent_frame_id=1}\n",
        "1 {file_location_id=1 parent_frame_id=1} 3 {file_location_id=1 parent_frame_id=1}\n")
    frames = hlofuse.loads(text).stack_frames
    assert frames.frames == {1: (1, 0), 3: (1, 0), 2: (2, 1)}
    assert sorted(frames.file_names) == [1, 2] and frames.function_names == {1: "f"}


def test_entries_in_another_spelling_give_the_same_tables():
    """Entries as JAX prints them are read with one match each (sections._LOCATION_RE,
    _FRAME_RE); the same entries with their fields reordered, spaced otherwise or with a field
    more are read field by field, into the same tables."""
    from hlofuse.parse.sections import stack_frame_index

    locations = [f"{k} {{file_name_id={k % 3 + 1} function_name_id={k % 5 + 1} line={10 * k} end_line={10 * k} "
                 f"column={k} end_column={k + 9}}}" for k in range(1, 40)]
    frames = [f"{k} {{file_location_id={k} parent_frame_id={k // 2 + 1}}}" for k in range(1, 40)]

    def respelled(entry: str) -> str:
        ident, body = entry.split(" ", 1)
        fields = body[1:-1].split(" ")[::-1] + ["extra_id=7"]
        return f"{ident}\t{{ " + ",  ".join(fields) + " }"

    def tables(locs, frms):
        index = stack_frame_index([("FILE_LOCATIONS", [(e, 1, 1) for e in locs]),
                                   ("STACK_FRAMES", [(e, 1, 1) for e in frms])])
        return index.file_locations, index.frames

    common = tables(locations, frames)
    assert common == tables([respelled(e) for e in locations], [respelled(e) for e in frames])
    assert common[0][3] == (1, 4, 30, 3) and common[1][3] == (3, 1) and common[1][1] == (1, 0)
