"""Versions of the loaded libraries and of the binding; an absent library
shows as absent."""
import io

import ncclbind
from ncclbind import LibraryInfo, Version, library_info, version_info


def test_get_version_is_the_loaded_librarys():
    code = ncclbind.get_version()
    assert code == library_info("nccl").version.code
    assert code >= 22809


def test_version():
    v = Version.from_code(22809)
    assert (v.major, v.minor, v.patch) == (2, 28, 9) and str(v) == "2.28.9" and v.code == 22809
    assert Version.from_code(2708) == Version(2, 7, 8)  # NCCL's encoding before 2.9
    assert Version.from_code(200, "nccl_ep") == Version(0, 2, 0)
    assert Version.parse("2.32.3") > v and v >= (2, 28, 0)


def test_library_info_of_the_loaded_nccl():
    info = library_info("nccl")
    assert isinstance(info, LibraryInfo) and info.loaded
    assert info.path.endswith("libnccl.so.2") or "libnccl" in info.path
    assert info.version >= Version(2, 28, 9)
    if info.cuda_version:
        assert info.cuda_variant == f"cu{info.cuda_version[0]}"


def test_a_library_that_cannot_load_is_absent_not_an_error():
    info = library_info("nccl_ep")
    if not info.loaded:  # no libnccl_ep here (or it needs libcuda.so.1)
        assert "libnccl_ep" in info.error
        assert "absent" in str(info)


def test_show_versions():
    out = io.StringIO()
    ncclbind.show_versions(file=out)
    text = out.getvalue()
    assert "ncclbind" in text and "libnccl " in text and "libnccl_ep" in text
    assert "2.28.9" in text
    info = version_info()
    assert info.header_versions["nccl"] == ["2.28.9", "2.32.3"]
