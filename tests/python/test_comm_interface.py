"""The Communicator's internal interface is declared once (ncclbind/base/comm_interface.py) and
the three places that rely on it agree with that declaration: the C fast path as compiled
(_nccl._comm_interface(): the slots it reads, in its enum's order, and the method it calls), the
Communicator class (its __slots__ and methods), and the generator's reading of the file (what
the generated header was rendered from)."""
import pathlib

import ncclbind
from ncclbind import _nccl
from ncclbind.base import comm_interface
from ncclbind.core.communicator import Communicator

from generator.render.policy_python import comm_interface as generator_reading

SLOT_NAMES = tuple(name for name, _ in comm_interface.SLOTS)


def test_the_c_fast_path_reads_the_declared_slots_and_method():
    fields, op_method = _nccl._comm_interface()
    assert fields == SLOT_NAMES
    assert op_method == comm_interface.FAST_PATH_METHOD


def test_the_communicator_has_every_declared_slot_and_method():
    assert set(SLOT_NAMES) <= set(Communicator.__slots__)
    for name, _ in comm_interface.METHODS:
        assert callable(getattr(Communicator, name, None)), name
    # every slot is a writable member the fast path can read at its offset
    for name in SLOT_NAMES:
        assert type(Communicator.__dict__[name]).__name__ == "member_descriptor", name


def test_the_generator_reads_the_same_declaration():
    source = pathlib.Path(comm_interface.__file__)
    reading = generator_reading(source)
    assert reading["SLOTS"] == comm_interface.SLOTS
    assert reading["METHODS"] == comm_interface.METHODS
    assert reading["FAST_PATH_METHOD"] == comm_interface.FAST_PATH_METHOD


def test_a_declaration_the_fast_path_cannot_call_is_refused(tmp_path):
    bad = tmp_path / "comm_interface.py"
    bad.write_text('SLOTS = (("_handle", "h"),)\nMETHODS = (("_live", "l"),)\nFAST_PATH_METHOD = "_op"\n')
    try:
        generator_reading(bad)
    except SystemExit as stop:
        assert "FAST_PATH_METHOD '_op' is not one of METHODS" in str(stop)
    else:
        raise AssertionError("a FAST_PATH_METHOD outside METHODS was accepted")
    assert ncclbind  # the package (and its extension) imported above
