"""A Shape keeps its hash once computed (issue 22: caches keyed by the shape itself, not by
id(shape)): equal shapes hash equal, and the kept hash is no part of the value."""

from __future__ import annotations

import copy
import os
import pickle
import subprocess
import sys
from pathlib import Path

import hlofuse
from hlofuse.ir import Layout, Shape

ROOT = Path(__file__).resolve().parent.parent


def _shapes() -> tuple[Shape, Shape]:
    inner = Shape("f32", (8, 128), Layout((1, 0), "T(8,128)"))
    return inner, Shape("tuple", (), None, (inner, Shape("s32", ()), Shape("f32", (4, 5), None, (), (True, False))))


def test_equal_shapes_hash_equal_and_the_hash_is_kept():
    for shape in _shapes():
        equal = pickle.loads(pickle.dumps(shape))
        assert equal is not shape and equal == shape
        assert shape._hash == -1  # not computed until asked
        first = hash(shape)
        assert shape._hash == first and hash(shape) == first
        assert hash(equal) == first and {shape: 1}[equal] == 1
        # the same value as the dataclass hash over the compared fields it replaces
        assert first == hash((shape.element_type, shape.dims, shape.layout, shape.tuple_shapes, shape.dynamic))
    a, b = _shapes()
    assert a != b and hash(a) != hash(b)
    assert Shape("f32", (8, 128)) != Shape("f32", (8, 128), Layout((1, 0)))


def test_the_kept_hash_is_no_part_of_the_value():
    shape, _ = _shapes()
    fresh, _ = _shapes()
    hash(shape)
    assert shape == fresh and fresh._hash == -1  # equality ignores it
    assert repr(shape) == repr(fresh) and "_hash" not in repr(shape)
    assert pickle.dumps(shape) == pickle.dumps(fresh)  # not pickled
    for twin in (copy.copy(shape), copy.deepcopy(shape)):
        assert twin == shape and hash(twin) == hash(shape)


def test_a_shape_pickled_with_its_hash_hashes_as_the_loading_process_does(tmp_path):
    """A str's hash differs between processes: a hash pickled with the shape would be wrong in
    the next process, and the loaded shape would miss every cache entry of an equal shape."""
    shapes = _shapes()
    for shape in shapes:
        hash(shape)
    (tmp_path / "shapes.pickle").write_bytes(pickle.dumps(shapes))
    script = (
        "import pickle, sys\n"
        "sys.path.insert(0, sys.argv[2])\n"
        "from tests.test_shape_hash import _shapes\n"
        "loaded = pickle.load(open(sys.argv[1], 'rb'))\n"
        "fresh = _shapes()\n"
        "print(all(hash(a) == hash(b) and {a: 1}.get(b) == 1 for a, b in zip(loaded, fresh)), hash(fresh[0]))\n")
    env = dict(os.environ, PYTHONHASHSEED="12345", PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-c", script, str(tmp_path / "shapes.pickle"), str(ROOT)], env=env,
                         capture_output=True, text=True, check=True).stdout.split()
    assert out[0] == "True"
    assert int(out[1]) != hash(shapes[0]) or os.environ.get("PYTHONHASHSEED") == "12345"  # another process's hash
