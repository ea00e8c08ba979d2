"""An API the loaded library lacks raises, naming the function, the version
that has it and the version loaded; versioned structs take the loaded
library's layout. Other libraries are loaded in a subprocess (the library
choice is per process)."""
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

import ncclbind._nccl as nccl
from ncclbind.errors import NcclSymbolNotFoundError

ROOT = pathlib.Path(__file__).resolve().parents[2]
NCCL_2_32_3 = pathlib.Path(os.environ.get("NCCLBIND_NCCL_2_32_3",
                                          ROOT / ".cache/header_sets/nccl-2.32.3/lib/libnccl.so.2")).absolute()


def test_a_function_newer_than_the_loaded_library():
    if nccl.get_version() >= 23203:
        pytest.skip("the loaded libnccl has ncclCommGrow")
    with pytest.raises(NcclSymbolNotFoundError) as info:
        nccl.comm_grow(0, 1, bytes(128), 0, None)
    message = str(info.value)
    assert "ncclCommGrow" in message and "2.32.3" in message and "2.28.9" in message
    assert info.value.function == "ncclCommGrow"


def test_the_since_table_names_the_first_version():
    assert nccl.since["ncclCommGrow"] == ("2.32.3", 23203)
    assert nccl.since["ncclAllReduce"] == ("2.28.9", 22809)


def run_with_library(path, code):
    env = dict(os.environ, NCCLBIND_NCCL_PATH=str(path), PYTHONPATH=os.pathsep.join(sys.path))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], env=env, capture_output=True, text=True,
                          timeout=120)


@pytest.mark.skipif(not NCCL_2_32_3.exists(), reason=f"{NCCL_2_32_3} is not here (tools/fetch_inputs.py)")
def test_with_2_32_3_loaded_structs_take_its_layout():
    result = run_with_library(NCCL_2_32_3, """
        import ncclbind._nccl as nccl
        assert nccl.get_version() == 23203
        cfg = nccl.nccl_config_initializer()
        assert (cfg.layout_version, cfg.nbytes, cfg.version) == ("2.32.3", 120, 23203)
        cfg.graphUsageMode = 1
        reqs = nccl.nccl_dev_comm_requirements_initializer()
        assert reqs.layout_version == "2.32.3" and reqs.version == 23203
        print("ok")
    """)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr


def test_a_missing_library_raises_a_listing_of_what_was_tried(tmp_path):
    result = run_with_library(tmp_path / "libnccl.so.2", """
        import ncclbind
        from ncclbind.errors import NcclLibraryNotFoundError
        try:
            ncclbind.get_version()
        except NcclLibraryNotFoundError as e:
            assert "could not be loaded" in str(e), str(e)
            print("ok")
        assert not ncclbind.library_info("nccl").loaded
    """)
    assert result.returncode == 0 and "ok" in result.stdout, result.stderr
