//! Every mirror's size, alignment and field offsets are asserted at compile time against
//! each header set's IR (bindings/rust/src/sys/layout_assertions/): if this test builds,
//! they hold. Here: the initializers, and that each header layout has its own mirror.

use ncclbind::sys::nccl::*;

#[test]
fn the_config_initializer_has_the_newest_headers_values() {
    let config = NCCL_CONFIG_INITIALIZER();
    assert_eq!(config.size, size_of::<ncclConfig_t>());
    assert_eq!(config.magic, NCCL_API_MAGIC);
    assert_eq!(config.version, 23203);
    assert_eq!(config.blocking, NCCL_CONFIG_UNDEF_INT);
    assert_eq!(config.hostCftMode, ncclHostCftMode_t::ncclHostCftDefault.0);
    assert!(config.netName.is_null());
}

#[test]
fn an_older_layout_has_its_own_mirror_and_initializer() {
    const OLD: ncclConfig_t__v22809 = NCCL_CONFIG_INITIALIZER__v22809();
    assert_eq!(OLD.size, 80);
    assert_eq!(size_of::<ncclConfig_t__v22809>(), 80);
    assert_eq!(OLD.version, 22809);
    assert_eq!(OLD.nvlinkCentricSched, NCCL_CONFIG_UNDEF_INT);
    assert!(size_of::<ncclConfig_t>() > size_of::<ncclConfig_t__v22809>());
}

#[test]
fn float_initializer_values_survive() {
    let info = NCCL_SIM_INFO_INITIALIZER();
    assert_eq!(info.size, size_of::<ncclSimInfo_t>());
    assert_eq!(info.estimatedTime, NCCL_UNDEF_FLOAT);
}

#[test]
fn unnamed_member_types_are_named_after_their_parent() {
    let option = ncclConfigExt_t {
        next: std::ptr::null_mut(),
        key: ncclConfigExt_t__key {
            vendorId: 7,
            optionId: 1,
        },
        val: ncclConfigExt_t__val { i: 42 },
    };
    assert_eq!(unsafe { option.val.i }, 42);
    assert_eq!(size_of::<ncclConfigExt_t__val>(), size_of::<*const u8>());
}

#[test]
fn opaque_handles_are_distinct_pointer_sized_types() {
    assert_eq!(size_of::<ncclComm_t>(), size_of::<*mut u8>());
    assert!(ncclComm_t::NULL.is_null());
    assert_eq!(format!("{:?}", ncclComm_t::NULL), "ncclComm_t(0x0)");
}

#[test]
fn alignment_attributes_carry_over() {
    assert_eq!(align_of::<ncclCftSmem>(), 16);
}
