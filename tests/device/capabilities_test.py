"""ncclbind.device.capabilities over a device communicator record in the loaded library's
layout (NCCLBIND_NCCL_PATH: one header set's real libnccl, loaded without a GPU): GIN and
multimem are refused on the host, before any launch, with NcclStateError saying why."""
import json
import os
import sys
from pathlib import Path

REPO = Path(os.path.abspath(__file__)).parent.parent.parent
sys.path.insert(0, str(REPO / "bindings" / "python"))

import pytest  # noqa: E402

from ncclbind import _nccl  # noqa: E402
from ncclbind.core.versions import loaded_version_code  # noqa: E402
from ncclbind.device import capabilities  # noqa: E402
from ncclbind.errors import NcclInvalid, NcclStateError  # noqa: E402


def loaded_devcomm_fields():
    """The ncclDevComm fields of the loaded release, from its IR."""
    code = loaded_version_code()
    for path in sorted((REPO / "bindings" / "ir").glob("nccl-*.json")):
        ir = json.loads(path.read_text())
        if ir["version_code"] == code:
            return [f["name"] for r in ir["records"] if r["name"] == "ncclDevComm_t" for f in r["fields"]]
    pytest.fail(f"no header set of NCCL {code} in bindings/ir")


def gin_count_field():
    # The DevComm's count of GIN connections: 2.29+ ginConnectionCount, 2.28 ginContextCount.
    fields = loaded_devcomm_fields()
    return next(name for name in ("ginConnectionCount", "ginContextCount") if name in fields)


def test_a_devcomm_without_gin_is_refused_saying_why():
    record = _nccl.ncclDevComm_t()
    assert not capabilities.has_gin(record)
    with pytest.raises(NcclStateError, match="GIN type NONE"):
        capabilities.require_gin(record, "ncclGinBarrierSessionInit")
    with pytest.raises(NcclStateError, match="^ncclGinBarrierSessionInit needs GIN"):
        capabilities.require_gin(record, "ncclGinBarrierSessionInit")


def test_a_devcomm_with_gin_connections_passes():
    record = _nccl.ncclDevComm_t()
    setattr(record, gin_count_field(), 2)
    assert capabilities.gin_connection_count(record) == 2
    capabilities.require_gin(record)


def test_multimem_needs_the_lsa_multicast_handle():
    record = _nccl.ncclDevComm_t()
    with pytest.raises(NcclStateError, match="NVLS"):
        capabilities.require_multimem(record, "ncclMultimemReduceSum_F32")
    handle = record.lsaMultimem
    handle.mcBasePtr = 0x10000
    record.lsaMultimem = handle
    assert capabilities.has_multimem(record)
    capabilities.require_multimem(record)


def test_gin_context_refuses_a_devcomm_without_gin_before_any_launch():
    from ncclbind.device import gin_context
    record = _nccl.ncclDevComm_t()
    with pytest.raises(NcclStateError, match=r"^an ncclGin \(ncclbind.device.intrinsics.gin\) needs GIN.*GIN type NONE"):
        gin_context(record, 0)
    setattr(record, gin_count_field(), 1)
    assert int(gin_context(record, 0)) == 0 and int(gin_context(record, 3)) == 3
    for bad in (-1, 1.5, True, "0"):
        with pytest.raises(NcclInvalid) as info:
            gin_context(record, bad)
        assert info.value.argument == "index"


class Window:
    window, buffer = 0x7000, object()


def test_multimem_window_refuses_a_devcomm_without_multicast():
    from ncclbind.device import multimem_window
    record = _nccl.ncclDevComm_t()
    with pytest.raises(NcclStateError, match=r"^a multimem pointer .* needs a multicast \(NVLS\) object"):
        multimem_window(record, Window())
    handle = record.lsaMultimem
    handle.mcBasePtr = 0x10000
    record.lsaMultimem = handle
    assert int(multimem_window(record, Window())) == 0x7000


class Closed:
    _closed = True
    dev_comm = None


@pytest.mark.parametrize("value", [42, "comm", None, Closed()])
def test_not_a_devcomm_names_the_argument(value):
    with pytest.raises(NcclInvalid) as info:
        capabilities.require_gin(value)
    assert info.value.argument == "dev_comm"


if __name__ == "__main__":
    sys.exit(pytest.main([__file__, "-q"]))
