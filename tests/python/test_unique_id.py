"""UniqueId: 128 bytes from ncclGetUniqueId, as bytes, pickled, and shared
through MPI or a torch.distributed store."""
import pickle

import pytest

from ncclbind import UniqueId
from ncclbind.errors import NcclInvalid


def test_a_new_id_is_128_bytes_from_nccl():
    uid = UniqueId.generate()
    data = uid.to_bytes()
    assert len(data) == 128 and bytes(uid) == data and any(data)
    assert UniqueId.generate() != uid


def test_bytes_round_trip_and_pickle():
    uid = UniqueId.generate()
    assert UniqueId.from_bytes(uid.to_bytes()) == uid
    assert pickle.loads(pickle.dumps(uid)) == uid
    assert repr(uid).startswith("UniqueId(")


def test_an_empty_id_is_nccl4pys_and_fills_in_place():
    """nccl4py: UniqueId() and get_unique_id(empty=True) are all-zero ids, and as_ndarray is
    a writable view: the receiving ranks of an MPI Bcast get the root's id through it."""
    np = pytest.importorskip("numpy")
    import ncclbind
    for empty in (UniqueId(), ncclbind.get_unique_id(empty=True)):
        assert empty.as_bytes == bytes(128)
    root, receiver = ncclbind.get_unique_id(), UniqueId()
    view = receiver.as_ndarray
    view[:] = np.frombuffer(root.as_bytes, dtype=np.uint8)  # what Comm.Bcast(view) does
    assert receiver == root and receiver.to_bytes() == root.to_bytes()
    import ctypes
    assert ctypes.string_at(receiver.ptr, 128) == root.as_bytes
    with pytest.raises(TypeError):
        hash(receiver)  # mutable through as_ndarray


def test_wrong_length_is_rejected():
    with pytest.raises(NcclInvalid):
        UniqueId.from_bytes(b"\x00" * 127)


class DictStore:
    """What share_store uses of a torch.distributed Store: set and a blocking get."""

    def __init__(self):
        self.values = {}

    def set(self, key, value):
        self.values[key] = bytes(value)

    def get(self, key):
        return self.values[key]


def test_share_through_a_store():
    store = DictStore()
    root = UniqueId.share_store(store, rank=0)
    other = UniqueId.share_store(store, rank=1)
    assert root == other


def test_share_through_a_real_torch_store(tmp_path):
    dist = pytest.importorskip("torch.distributed")
    store = dist.FileStore(str(tmp_path / "store"), 2)
    assert UniqueId.share_store(store, rank=0) == UniqueId.share_store(store, rank=1)


class OneRankComm:
    """What broadcast_mpi uses of an mpi4py communicator."""

    def Get_rank(self):
        return 0

    def bcast(self, data, root=0):
        return data


def test_share_through_mpi():
    assert len(UniqueId.broadcast_mpi(OneRankComm()).to_bytes()) == 128


def test_share_through_real_mpi4py():
    pytest.importorskip("mpi4py.MPI")
    assert len(UniqueId.broadcast_mpi().to_bytes()) == 128
