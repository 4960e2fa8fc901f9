"""`hlofuse compile` and `compile_jax` check what they are given before they start a process
that imports JAX, and say in one line what to install when JAX or its CUDA plugin is missing
or does not match (issue 19).  None of these tests needs JAX."""

from __future__ import annotations


import pytest
from click.testing import CliRunner

from hlofuse.cli import main
from hlofuse.errors import EXIT_BACKEND, EXIT_INPUT, EXIT_USAGE, BackendUnavailable, OptionError
from hlofuse.from_jax import MANIFEST, compile as compile_mod, folder as folder_mod, install
from hlofuse.from_jax.arguments import ArraySpec, Literal, parse_arg, parse_args, parse_argnums


def invoke(*args):
    return CliRunner().invoke(main, [str(a) for a in args])


# ------------------------------------------------------------------------------------------
# --arg
# ------------------------------------------------------------------------------------------


def test_shapes_in_xla_and_numpy_spelling():
    assert parse_arg("f32[2048,4]") == ArraySpec((2048, 4), "float32")
    assert parse_arg("bf16[]") == ArraySpec((), "bfloat16")
    assert parse_arg("pred[8]") == ArraySpec((8,), "bool")
    assert parse_arg("float32[ 3 , 5 ]") == ArraySpec((3, 5), "float32")
    assert parse_arg("s32[7]") == ArraySpec((7,), "int32")
    assert str(ArraySpec((2, 3), "float16")) == "float16[2,3]"


def test_literals_static_and_traced():
    assert parse_arg("0.5") == Literal(0.5)  # traced as a weakly typed scalar
    assert parse_arg("'relu'", static=True) == Literal("relu")
    assert parse_arg("(1, 2)", static=True) == Literal((1, 2))
    with pytest.raises(OptionError, match="can only be a static argument"):
        parse_arg("'relu'")
    with pytest.raises(OptionError, match="unknown element type 'f33'"):
        parse_arg("f33[4]")
    with pytest.raises(OptionError, match="expected a shape such as f32"):
        parse_arg("f32(4)")
    with pytest.raises(OptionError, match="dimensions are numbers"):
        parse_arg("f32[4,,2]")


def test_static_argnums_name_positions_of_the_arguments():
    assert parse_argnums("2,0") == (0, 2) and parse_argnums(None) == ()
    assert parse_args(["f32[4]", "3"], (1,)) == (ArraySpec((4,), "float32"), Literal(3))
    with pytest.raises(OptionError, match="there are 2 --arg values"):
        parse_args(["f32[4]", "3"], (2,))
    with pytest.raises(OptionError, match="positions separated by commas"):
        parse_argnums("one")


# ------------------------------------------------------------------------------------------
# What to install
# ------------------------------------------------------------------------------------------


def fake_versions(monkeypatch, **versions):
    names = {k.replace("_", "-"): v for k, v in versions.items()}
    monkeypatch.setattr(install, "installed", lambda dist: names.get(dist))


def test_without_jax_one_line_says_to_install_the_extra(monkeypatch):
    fake_versions(monkeypatch)
    with pytest.raises(BackendUnavailable) as err:
        install.require("cpu", deviceless=False)
    assert str(err.value) == ("compiling a JAX function needs JAX (jax and jaxlib are not installed): "
                              "pip install 'hlofuse[jax]'")


def test_a_jax_without_the_cuda_plugin_is_told_which_plugin_matches_its_jaxlib(monkeypatch):
    fake_versions(monkeypatch, jax="0.10.2", jaxlib="0.10.2")
    assert install.require("cpu", deviceless=False)["jaxlib"] == "0.10.2"  # XLA:CPU needs no plugin
    with pytest.raises(BackendUnavailable) as err:
        install.require("gpu", deviceless=True)
    message = str(err.value)
    assert "compiling for a GPU without one needs JAX's CUDA plugin, which is not installed" in message
    assert "pip install 'hlofuse[jax]'" in message
    assert "'jax-cuda12-plugin==0.10.2' 'jax-cuda12-pjrt==0.10.2'" in message and "\n" not in message


def test_a_plugin_of_another_version_than_jaxlib_is_refused_with_the_matching_one(monkeypatch):
    fake_versions(monkeypatch, jax="0.10.2", jaxlib="0.10.2", jax_cuda12_plugin="0.9.0", jax_cuda12_pjrt="0.10.2")
    with pytest.raises(BackendUnavailable) as err:
        install.require("gpu", deviceless=True)
    assert str(err.value).startswith("jax-cuda12-plugin is 0.9.0, and JAX's CUDA plugin loads only beside the jaxlib "
                                     "of its own version (0.10.2): pip install 'jax-cuda12-plugin==0.10.2' "
                                     "'jax-cuda12-pjrt==0.10.2'")
    fake_versions(monkeypatch, jax="0.10.2", jaxlib="0.10.2", jax_cuda13_plugin="0.10.2")
    with pytest.raises(BackendUnavailable, match="jax-cuda13-pjrt is missing"):
        install.require("gpu", deviceless=True)
    fake_versions(monkeypatch, jax="0.10.2", jaxlib="0.10.2", jax_cuda12_plugin="0.10.2", jax_cuda12_pjrt="0.10.2")
    assert install.require("gpu", deviceless=True)["jax-cuda12-plugin"] == "0.10.2"


def test_another_jax_than_the_rules_is_a_note_not_an_error():
    assert install.version_note({"jaxlib": install.PINNED}) is None
    note = install.version_note({"jaxlib": "0.11.2"})
    assert "jaxlib 0.11.2" in note and install.PINNED in note


def test_the_command_without_jax_exits_5_with_the_install_line(tmp_path, monkeypatch):
    fake_versions(monkeypatch, jax="0.10.2", jaxlib="0.10.2")
    script = tmp_path / "model.py"
    script.write_text("def f(x):\n    return x\n")
    result = invoke("compile", f"{script}:f", "--arg", "f32[8]", "--gpu", "h100_sxm")
    assert result.exit_code == EXIT_BACKEND
    [line] = result.stderr.strip().splitlines()  # nothing said about compiling: nothing was
    assert line.startswith("error: compiling for a GPU without one needs JAX's CUDA plugin")


# ------------------------------------------------------------------------------------------
# Options checked before any work
# ------------------------------------------------------------------------------------------


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "model.py"
    path.write_text("def f(x):\n    return x\n")
    return path


@pytest.fixture
def no_process(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("a compiling process was started before the options were checked")

    monkeypatch.setattr(compile_mod._Plan, "_child", refuse)


def test_bad_options_are_refused_before_compiling(script, tmp_path, no_process):
    cases = [
        (["compile", "model.py", "--arg", "f32[8]"], EXIT_USAGE, "expected SCRIPT.py:FUNCTION"),
        (["compile", f"{script}:f", "--arg", "f32[8]", "--args-from", "g"], EXIT_USAGE, "not both"),
        (["compile", f"{script}:f", "--arg", "x32[8]"], EXIT_USAGE, "unknown element type"),
        (["compile", f"{script}:f", "--arg", "f32[8]", "--gpu", "h99"], EXIT_INPUT, "unknown GPU 'h99'"),
        (["compile", f"{script}:f", "--arg", "f32[8]", "--backend", "cpu", "--gpu", "h100_sxm"], EXIT_USAGE,
         "describes a GPU"),
        (["compile", f"{tmp_path}/missing.py:f", "--arg", "f32[8]"], EXIT_INPUT, "no such script"),
        (["compile", f"{script}:f", "--arg", "f32[8]", "--xla-flags", "--xla_gpu_enable_reduction_epilogue_fusion=maybe"],
         EXIT_USAGE, "not a value XLA takes"),
        (["compile", f"{script}:f", "--arg", "f32[8]", "-o", tmp_path / "no" / "dump"], EXIT_INPUT, "does not exist"),
    ]
    for args, code, words in cases:
        result = invoke(*args)
        assert result.exit_code == code, (args, result.output)
        assert words in result.stderr, (args, result.stderr)


def test_an_output_folder_holding_other_files_is_refused(script, tmp_path, no_process):
    out = tmp_path / "dump"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    result = invoke("compile", f"{script}:f", "--arg", "f32[8]", "--backend", "cpu", "-o", out)
    assert result.exit_code == EXIT_INPUT and "holds other files" in result.stderr
    assert (out / "notes.txt").read_text() == "mine"
    (out / MANIFEST).write_text('{"files": ["module_0001.jit_f.before_optimizations.txt"]}')
    result = invoke("compile", f"{script}:f", "--arg", "f32[8]", "--backend", "cpu", "-o", out)
    assert result.exit_code == EXIT_INPUT and "did not write (notes.txt)" in result.stderr
    link = tmp_path / "link"
    link.symlink_to(out)
    result = invoke("compile", f"{script}:f", "--arg", "f32[8]", "--backend", "cpu", "-o", link)
    assert result.exit_code == EXIT_INPUT and "symbolic link" in result.stderr


def test_a_folder_an_earlier_compile_wrote_may_be_replaced(tmp_path):
    out = tmp_path / "dump"
    out.mkdir()
    (out / "module_0001.jit_f.before_optimizations.txt").write_text("old")
    (out / MANIFEST).write_text('{"files": ["module_0001.jit_f.before_optimizations.txt"]}')
    assert set(folder_mod.check_out(out, [])) == {MANIFEST, "module_0001.jit_f.before_optimizations.txt"}
    assert folder_mod.check_out(tmp_path / "new", []) == ()
