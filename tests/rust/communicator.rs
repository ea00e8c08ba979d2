//! Creating a communicator. Without a GPU, ncclCommInitRank fails with NCCL's own error
//! and text; with one, a one-rank communicator comes up and is finalized.

use ncclbind::{Communicator, Error, Group, UniqueId};

#[test]
fn init_fails_with_nccls_error_without_a_gpu_and_succeeds_with_one() {
    let id = UniqueId::new().unwrap();
    match Communicator::init_rank(1, &id, 0) {
        Ok(comm) => {
            assert_eq!((comm.rank(), comm.size()), (0, 1));
            assert_eq!(comm.count().unwrap(), 1);
            comm.finalize().unwrap();
        }
        Err(err) => {
            let Error::Nccl { function, code, .. } = &err else {
                panic!("not NCCL's error: {err}")
            };
            assert_eq!(*function, "ncclCommInitRank");
            assert!((1..=8).contains(code), "{err}");
            assert!(err.name().starts_with("nccl"), "{err}");
            assert!(
                !err.nccl_last_error().is_empty(),
                "ncclGetLastError said nothing: {err}"
            );
        }
    }
}

#[test]
fn init_checks_ranks_before_calling_nccl() {
    let id = UniqueId::from_bytes([0; 128]);
    assert_eq!(
        Communicator::init_rank(0, &id, 0).unwrap_err(),
        Error::InvalidRankCount { nranks: 0 }
    );
    assert_eq!(
        Communicator::init_rank(2, &id, 2).unwrap_err(),
        Error::RankOutOfRange {
            argument: "rank",
            rank: 2,
            nranks: 2
        }
    );
    assert_eq!(
        Communicator::init_rank(2, &id, -1).unwrap_err(),
        Error::RankOutOfRange {
            argument: "rank",
            rank: -1,
            nranks: 2
        }
    );
    assert_eq!(
        Communicator::init_all(&[]).unwrap_err(),
        Error::InvalidRankCount { nranks: 0 }
    );
}

/// Compiles only while T is not Sync: with T: Sync both impls apply and the call is ambiguous.
trait AmbiguousIfSync<Marker> {
    fn check() {}
}
impl<T: ?Sized> AmbiguousIfSync<()> for T {}
impl<T: ?Sized + Sync> AmbiguousIfSync<u8> for T {}

/// Compiles only while T is not Send.
trait AmbiguousIfSend<Marker> {
    fn check() {}
}
impl<T: ?Sized> AmbiguousIfSend<()> for T {}
impl<T: ?Sized + Send> AmbiguousIfSend<u8> for T {}

fn is_send<T: Send>() {}

#[test]
fn a_communicator_moves_between_threads_but_is_never_shared() {
    is_send::<Communicator>();
    <Communicator as AmbiguousIfSync<_>>::check();
    // NCCL groups are per thread.
    <Group as AmbiguousIfSend<_>>::check();
}
