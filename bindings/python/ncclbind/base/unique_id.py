"""UniqueId: the 128 bytes every rank of a new communicator must share."""
from __future__ import annotations

from .. import _nccl
from .._generated.nccl_enums import NCCL_UNIQUE_ID_BYTES as NBYTES  # the headers' size of an id

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing; checkers read it as True
if TYPE_CHECKING:
    from ..core.argument_types import KeyValueStore, MpiComm


class UniqueId:
    """An ncclUniqueId: create one on one rank, send its bytes to the others (pickle,
    MPI, a torch.distributed store), init with it.

        uid = get_unique_id()                 # ncclGetUniqueId (or UniqueId.generate())
        data = uid.to_bytes()                 # or bytes(uid), pickle.dumps(uid)
        uid = UniqueId.from_bytes(data)

    UniqueId() is an empty (all-zero) id, as in nccl4py: as_ndarray is a writable view of
    its bytes, to receive another rank's id in place (MPI Bcast). Equal ids compare equal;
    an id is not hashable, since as_ndarray can change it.
    """

    __slots__ = ("_bytes",)
    __hash__ = None  # type: ignore[assignment]

    def __init__(self, data: bytes | None = None):
        if data is None:
            data = bytes(NBYTES)
        else:
            if isinstance(data, UniqueId):
                data = data._bytes
            try:  # bytes-like only: bytes(128) would be 128 zero bytes
                data = bytes(memoryview(data))
            except TypeError:
                from ..errors import NcclInvalid
                raise NcclInvalid(f"a unique id is {NBYTES} bytes (bytes, bytearray, memoryview), "
                                  f"not {type(data).__name__}", "data") from None
            if len(data) != NBYTES:
                from ..errors import NcclInvalid
                raise NcclInvalid(f"a unique id is {NBYTES} bytes, not {len(data)}", "data")
        self._bytes = bytearray(data)

    @classmethod
    def generate(cls) -> UniqueId:
        """A new id from ncclGetUniqueId (this also starts NCCL's bootstrap listener)."""
        return cls(bytes(_nccl.get_unique_id()))

    @classmethod
    def from_bytes(cls, b: bytes) -> UniqueId:
        """The id that another rank's to_bytes() gave."""
        return cls(b)

    @property
    def as_bytes(self) -> bytes:
        """The id's bytes (nccl4py's spelling of to_bytes())."""
        return bytes(self._bytes)

    @property
    def as_ndarray(self):
        """The id's 128 bytes as a NumPy uint8 array viewing them in place (writable: an MPI
        Bcast into it fills this id). Imports NumPy."""
        import numpy as np
        return np.frombuffer(self._bytes, dtype=np.uint8)

    @property
    def ptr(self) -> int:
        """The address of the id's bytes (an ncclUniqueId; valid while this object lives)."""
        import ctypes
        return ctypes.addressof(ctypes.c_char.from_buffer(self._bytes))

    def to_bytes(self) -> bytes:
        """The id's bytes (ncclUniqueId), to send to the other ranks."""
        return bytes(self._bytes)

    def __bytes__(self) -> bytes:
        return bytes(self._bytes)

    def __reduce__(self):
        return (type(self).from_bytes, (bytes(self._bytes),))

    def __eq__(self, other) -> bool:
        return isinstance(other, UniqueId) and other._bytes == self._bytes

    def __repr__(self) -> str:
        return f"UniqueId({bytes(self._bytes[:8]).hex()}...)"

    # ---- sharing ----------------------------------------------------------

    @classmethod
    def broadcast_mpi(cls, comm: MpiComm | None = None, root: int = 0) -> UniqueId:
        """Rank `root` of an mpi4py communicator (default COMM_WORLD) creates the
        id and every rank returns it."""
        if comm is None:
            from mpi4py import MPI
            comm = MPI.COMM_WORLD
        data = cls.generate().to_bytes() if comm.Get_rank() == root else None
        return cls(comm.bcast(data, root=root))

    @classmethod
    def share_store(cls, store: KeyValueStore, rank: int, root: int = 0, key: str = "ncclbind/unique_id") -> UniqueId:
        """Share through a torch.distributed Store (TCPStore, FileStore, ...):
        rank `root` creates the id and sets `key`; the others wait for it."""
        if rank == root:
            uid = cls.generate()
            store.set(key, uid.to_bytes())
            return uid
        return cls(store.get(key))


def get_unique_id(empty: bool = False) -> UniqueId:
    """A new unique id from ncclGetUniqueId (on one rank; share its bytes), or with empty=True
    an all-zero id to fill from another rank's bytes (nccl4py's get_unique_id)."""
    if not isinstance(empty, bool):
        from ..errors import NcclInvalid
        raise NcclInvalid(f"empty: a bool, not {type(empty).__name__}", "empty")
    return UniqueId() if empty else UniqueId.generate()
