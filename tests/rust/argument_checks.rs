//! Arguments are checked before NCCL is called: each mistake is its own error variant.
//! The communicator here is a stand-in that NCCL never sees (rank 0 of 4): any check that
//! let a call through would hand NCCL a bogus handle and crash this test.

use std::mem::ManuallyDrop;
use std::ptr::NonNull;

use ncclbind::sys::nccl::ncclComm_t;
use ncclbind::{Communicator, DataType, DeviceSlice, DeviceSliceMut, Error, RedOp, Stream};

const NRANKS: i32 = 4;

/// Runs `body` with a communicator NCCL never sees, and never destroys it (not even when an
/// assertion fails).
fn with_stand_in_communicator(body: impl FnOnce(&Communicator)) {
    let raw = ncclComm_t(NonNull::dangling().as_ptr());
    let comm = ManuallyDrop::new(unsafe { Communicator::from_raw_parts(raw, 0, NRANKS) });
    body(&comm);
}

fn view<T: DataType>(len: usize) -> DeviceSlice<'static, T> {
    unsafe { DeviceSlice::from_raw_parts(NonNull::dangling().as_ptr(), len).unwrap() }
}

fn view_mut<T: DataType>(len: usize) -> DeviceSliceMut<'static, T> {
    unsafe { DeviceSliceMut::from_raw_parts(NonNull::dangling().as_ptr(), len).unwrap() }
}

fn device(len: usize) -> DeviceSlice<'static, f32> {
    view(len)
}

fn device_mut(len: usize) -> DeviceSliceMut<'static, f32> {
    view_mut(len)
}

fn device_bytes(len: usize) -> DeviceSlice<'static, u8> {
    view(len)
}

fn device_bytes_mut(len: usize) -> DeviceSliceMut<'static, u8> {
    view_mut(len)
}

const STREAM: Stream = Stream::PER_THREAD_DEFAULT;

#[test]
fn roots_and_peers_must_be_ranks_of_the_communicator() {
    with_stand_in_communicator(|comm| {
        let out_of_range = |argument, rank| {
            Err(Error::RankOutOfRange {
                argument,
                rank,
                nranks: NRANKS,
            })
        };
        assert_eq!(
            comm.reduce(&device(8), Some(&mut device_mut(8)), RedOp::SUM, 4, STREAM),
            out_of_range("root", 4)
        );
        assert_eq!(
            comm.broadcast(Some(&device(8)), &mut device_mut(8), -1, STREAM),
            out_of_range("root", -1)
        );
        assert_eq!(
            comm.broadcast_in_place(&mut device_mut(8), 7, STREAM),
            out_of_range("root", 7)
        );
        assert_eq!(
            comm.gather(&device(8), Some(&mut device_mut(32)), 4, STREAM),
            out_of_range("root", 4)
        );
        assert_eq!(
            comm.scatter(Some(&device(32)), &mut device_mut(8), -2, STREAM),
            out_of_range("root", -2)
        );
        assert_eq!(
            comm.send(&device(8), NRANKS, STREAM),
            out_of_range("peer", NRANKS)
        );
        assert_eq!(
            comm.recv(&mut device_mut(8), -1, STREAM),
            out_of_range("peer", -1)
        );
    });
}

#[test]
fn buffers_must_hold_exactly_what_the_operation_writes_or_reads() {
    with_stand_in_communicator(|comm| {
        let wrong = |argument, len, expected| {
            Err(Error::WrongLength {
                argument,
                len,
                expected,
            })
        };
        assert_eq!(
            comm.all_reduce(&device(8), &mut device_mut(7), RedOp::SUM, STREAM),
            wrong("recv", 7, 8)
        );
        // This rank (0) is the root, so its recv must hold the reduction.
        assert_eq!(
            comm.reduce(&device(8), Some(&mut device_mut(4)), RedOp::MAX, 0, STREAM),
            wrong("recv", 4, 8)
        );
        assert_eq!(
            comm.broadcast(Some(&device(2)), &mut device_mut(8), 0, STREAM),
            wrong("send", 2, 8)
        );
        assert_eq!(
            comm.all_gather(&device(8), &mut device_mut(31), STREAM),
            wrong("recv", 31, 32)
        );
        assert_eq!(
            comm.reduce_scatter(&device(31), &mut device_mut(8), RedOp::SUM, STREAM),
            wrong("send", 31, 32)
        );
        assert_eq!(
            comm.all_to_all(&device(32), &mut device_mut(16), STREAM),
            wrong("recv", 16, 32)
        );
        assert_eq!(
            comm.gather(&device(8), Some(&mut device_mut(8)), 0, STREAM),
            wrong("recv", 8, 32)
        );
        assert_eq!(
            comm.scatter(Some(&device(8)), &mut device_mut(8), 0, STREAM),
            wrong("send", 8, 32)
        );
        // Longer is refused too: NCCL would leave the extra elements out without a word.
        assert_eq!(
            comm.all_reduce(&device(8), &mut device_mut(9), RedOp::SUM, STREAM),
            wrong("recv", 9, 8)
        );
    });
}

#[test]
fn a_root_only_buffer_is_needed_on_the_root_and_checked_where_given() {
    with_stand_in_communicator(|comm| {
        // This rank (0) is the root of root 0 and not of root 1.
        let missing = |argument| Err(Error::MissingBuffer { argument });
        assert_eq!(
            comm.reduce(&device(8), None, RedOp::SUM, 0, STREAM),
            missing("recv")
        );
        assert_eq!(comm.gather(&device(8), None, 0, STREAM), missing("recv"));
        assert_eq!(
            comm.broadcast(None, &mut device_mut(8), 0, STREAM),
            missing("send")
        );
        assert_eq!(
            comm.scatter(None, &mut device_mut(8), 0, STREAM),
            missing("send")
        );
        assert_eq!(
            comm.gather(&device(8), Some(&mut device_mut(31)), 1, STREAM),
            Err(Error::WrongLength {
                argument: "recv",
                len: 31,
                expected: 32
            })
        );
    });
}

#[test]
fn counts_that_overflow_or_do_not_split_evenly_are_refused() {
    with_stand_in_communicator(|comm| {
        // Bytes: as many as a slice may hold, but not NRANKS times as many.
        let huge = isize::MAX as usize;
        let overflow = |argument| {
            Err(Error::CountOverflow {
                argument,
                count: huge,
                factor: NRANKS as usize,
            })
        };
        // The buffer named is the one whose needed length (count x nranks) overflows.
        assert_eq!(
            comm.all_gather(&device_bytes(huge), &mut device_bytes_mut(8), STREAM),
            overflow("recv")
        );
        assert_eq!(
            comm.reduce_scatter(
                &device_bytes(8),
                &mut device_bytes_mut(huge),
                RedOp::SUM,
                STREAM
            ),
            overflow("send")
        );
        assert_eq!(
            comm.gather(
                &device_bytes(huge),
                Some(&mut device_bytes_mut(8)),
                1,
                STREAM
            ),
            overflow("recv")
        );
        assert_eq!(
            comm.all_to_all(&device(30), &mut device_mut(30), STREAM),
            Err(Error::UnevenCount {
                argument: "send",
                len: 30,
                nranks: NRANKS
            })
        );
        assert_eq!(
            comm.split(Some(-3), 0).unwrap_err(),
            Error::InvalidColor { color: -3 }
        );
    });
    // The view itself: more elements than fit in isize bytes.
    let too_many = isize::MAX as usize / 4 + 1;
    let view =
        unsafe { DeviceSlice::<f32>::from_raw_parts(NonNull::dangling().as_ptr(), too_many) };
    assert_eq!(
        view.unwrap_err(),
        Error::CountOverflow {
            argument: "len",
            count: too_many,
            factor: 4
        }
    );
}

#[test]
fn a_null_stream_is_refused_and_the_default_streams_are_explicit() {
    let err = unsafe { Stream::from_raw(std::ptr::null_mut()) }.unwrap_err();
    assert_eq!(err, Error::NullStream);
    assert!(err.is_argument_error());
    assert_eq!(err.code(), 0x4E42_0003);
    assert_eq!(err.name(), "NCCLBIND_ERROR_INVALID_ARGUMENT");
    assert_eq!(Stream::LEGACY_DEFAULT.as_raw() as usize, 1);
    assert_eq!(Stream::PER_THREAD_DEFAULT.as_raw() as usize, 2);
}

#[test]
fn a_null_view_of_elements_is_refused_and_an_empty_one_is_not() {
    let err = unsafe { DeviceSlice::<f32>::from_raw_parts(std::ptr::null(), 1) }.unwrap_err();
    assert_eq!(err, Error::NullPointer { argument: "ptr" });
    assert!(err.is_argument_error());
    let err =
        unsafe { DeviceSliceMut::<f64>::from_raw_parts(std::ptr::null_mut(), 8) }.unwrap_err();
    assert_eq!(err, Error::NullPointer { argument: "ptr" });
    // cudaMalloc(0) gives null, and NCCL reads no element of an empty buffer.
    let empty = unsafe { DeviceSlice::<f32>::from_raw_parts(std::ptr::null(), 0) }.unwrap();
    assert!(empty.is_empty());
}

#[test]
fn a_view_misaligned_for_its_element_type_is_refused() {
    let address = 0x1000_0004usize; // aligned for f32, not for f64
    let err = unsafe { DeviceSlice::<f64>::from_raw_parts(address as *const f64, 2) }.unwrap_err();
    assert_eq!(
        err,
        Error::Misaligned {
            argument: "ptr",
            address,
            align: 8
        }
    );
    assert!(
        err.to_string()
            .contains("0x10000004 is not aligned to 8 bytes"),
        "{err}"
    );
    let err =
        unsafe { DeviceSliceMut::<i32>::from_raw_parts((address + 1) as *mut i32, 0) }.unwrap_err();
    assert_eq!(
        err,
        Error::Misaligned {
            argument: "ptr",
            address: address + 1,
            align: 4
        }
    );
    assert!(unsafe { DeviceSlice::<f32>::from_raw_parts(address as *const f32, 2) }.is_ok());
    assert!(unsafe { DeviceSlice::<u8>::from_raw_parts((address + 1) as *const u8, 3) }.is_ok());
}
