"""Versions of the loaded libraries and of the binding; an absent library
shows as absent."""
import io

import ncclbind
from ncclbind import LibraryInfo, Version, library_info, version_info


def test_version_code_is_the_loaded_librarys(api):
    code = ncclbind.version_code()
    assert code == library_info("nccl").version.code
    assert code >= min(api["nccl"]["version_codes"].values())


def test_get_version_is_nccl4pys_version_info(api):
    """nccl4py's get_version(): VersionInfo(nccl4py, nccl_bindings, libnccl), not an int."""
    info = ncclbind.get_version()
    assert isinstance(info, ncclbind.VersionInfo) and info is not None
    assert info.nccl4py == ncclbind.__version__ == info.ncclbind
    assert info.nccl_bindings == max(Version.parse(v) for v in api["nccl"]["versions"])
    assert info.libnccl.version.code == ncclbind.version_code()
    assert info.libnccl is info.nccl
    assert ncclbind.version_info is ncclbind.get_version


def test_version(api):
    for library in ("nccl", "nccl_ep"):
        for name, code in api[library]["version_codes"].items():
            v = Version.from_code(code, library)
            assert str(v) == name and v.code == code and Version.parse(name) == v
            assert (v.major, v.minor, v.patch) == tuple(int(x) for x in name.split("."))
    oldest, newest = (Version.parse(api["nccl"]["versions"][i]) for i in (0, -1))
    assert newest >= oldest and oldest >= (oldest.major, oldest.minor, 0)
    assert Version.from_code(2708) == Version(2, 7, 8)  # NCCL's encoding before 2.9


def test_library_info_of_the_loaded_nccl(api):
    info = library_info("nccl")
    assert isinstance(info, LibraryInfo) and info.loaded
    assert "libnccl" in info.path.name and info.path.exists()
    assert info.version >= Version.parse(api["nccl"]["versions"][0])
    if info.cuda_variant:  # nccl4py's CUDA major.minor, "13.0"; the wheel variant "cu13"
        assert str(info.cuda_variant) == f"{info.cuda_variant.major}.{info.cuda_variant.minor}"
        assert info.cuda_variant.variant == f"cu{info.cuda_variant.major}"
        assert f"+cuda{info.cuda_variant} @ {info.path}" in str(info)


def test_a_library_that_cannot_load_is_absent_not_an_error():
    info = library_info("nccl_ep")
    if not info.loaded:  # no libnccl_ep here (or it needs libcuda.so.1)
        assert "libnccl_ep" in info.error
        assert "absent" in str(info)


def test_an_absent_library_prints_every_line_of_its_reason():
    error = ("libnccl_ep could not be loaded; tried, in order:\n"
             "  1. libnccl_ep.so [CUDA_HOME]: cannot open shared object file\n"
             "  (libnccl_ep needs libnccl.so.2, which ncclbind could not load either)")
    absent = LibraryInfo(None, name="libnccl_ep", loaded=False, error=error)
    assert str(absent).splitlines() == ["libnccl_ep: absent: " + error.splitlines()[0]] + [
        "  " + line for line in error.splitlines()[1:]]
    info = version_info()
    text = str(type(info)(info.nccl4py, info.nccl_bindings, info.libnccl, python=info.python,
                          header_versions=info.header_versions, nccl=info.nccl, nccl_ep=absent))
    assert text.endswith("\n  libnccl_ep: absent: libnccl_ep could not be loaded; tried, in order:\n"
                         "      1. libnccl_ep.so [CUDA_HOME]: cannot open shared object file\n"
                         "      (libnccl_ep needs libnccl.so.2, which ncclbind could not load either)")


def test_show_versions(api):
    out = io.StringIO()
    ncclbind.show_versions(file=out)
    text = out.getvalue()
    assert "ncclbind" in text and "libnccl " in text and "libnccl_ep" in text
    assert str(library_info("nccl").version) in text
    for library in ("nccl", "nccl_ep"):
        info = library_info(library)
        for line in info.error.splitlines():  # an absent library's whole reason, never cut
            assert line.strip() in text
    info = version_info()
    assert info.header_versions == {library: api[library]["versions"] for library in ("nccl", "nccl_ep")}
