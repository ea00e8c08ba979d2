//! Group guards: a group ends when its guard is dropped or ended (no GPU needed).

use ncclbind::sys::nccl::ncclGroupEnd;
use ncclbind::{check, Error, Group};

/// ncclGroupEnd with no open group: NCCL's invalid usage.
fn no_group_is_open() -> bool {
    matches!(
        check("ncclGroupEnd", unsafe { ncclGroupEnd() }),
        Err(Error::Nccl { code: 5, .. })
    )
}

#[test]
fn dropping_the_guard_ends_the_group() {
    let group = Group::start().unwrap();
    drop(group);
    assert!(no_group_is_open());
}

#[test]
fn groups_nest_and_end_explicitly() {
    let outer = Group::start().unwrap();
    let inner = Group::start().unwrap();
    inner.end().unwrap();
    outer.end().unwrap();
    assert!(no_group_is_open());
}
