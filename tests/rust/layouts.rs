//! Every mirror's size, alignment and field offsets are asserted at compile time against
//! each header set's IR (bindings/rust/src/generated/sys/layout_assertions/): if this test builds,
//! they hold. Here: the initializers, and that each header layout has its own mirror.

use ncclbind::sys::config_layouts::{ConfigLayout, RawConfigLayout};
use ncclbind::sys::nccl::*;

mod ir;

#[test]
fn the_config_initializer_has_the_newest_headers_values() {
    let api = ir::api();
    let newest = ir::versions(&api).pop().unwrap();
    let config = NCCL_CONFIG_INITIALIZER();
    assert_eq!(config.size, size_of::<ncclConfig_t>());
    assert_eq!(config.magic, NCCL_API_MAGIC);
    assert_eq!(config.version as i32, ir::version_code(&api, &newest));
    assert_eq!(config.version, NCCL_VERSION_CODE as _);
    assert_eq!(config.blocking, NCCL_CONFIG_UNDEF_INT);
    assert!(config.netName.is_null());
}

#[test]
fn each_config_layout_of_the_ir_has_its_own_mirror_and_initializer() {
    let api = ir::api();
    let Some(ir::Json::Array(variants)) = api
        .get("record_variants")
        .and_then(|v| v.get("ncclConfig_t"))
    else {
        panic!("the IR has no ncclConfig_t")
    };
    assert_eq!(variants.len(), ConfigLayout::ALL.len());
    let mut sizes = Vec::new();
    for (variant, layout) in variants.iter().zip(ConfigLayout::ALL) {
        let Some(ir::Json::Array(versions)) = variant.get("versions") else {
            panic!("a variant without versions")
        };
        let codes: Vec<i32> = versions
            .iter()
            .map(|v| match v {
                ir::Json::String(v) => ir::version_code(&api, v),
                other => panic!("{other:?}"),
            })
            .collect();
        assert_eq!(layout.version_codes(), &codes[..], "{layout:?}");
        let Some(ir::Json::Number(size)) = variant.get("record").and_then(|r| r.get("size")) else {
            panic!("a variant without a size")
        };
        let mut raw = RawConfigLayout::new(layout);
        let p = raw.as_mut_ptr();
        // SAFETY: size, magic and version lead every layout; read in place, no reference made.
        let (filled_size, magic, version, blocking) = unsafe {
            (
                std::ptr::addr_of!((*p).size).read(),
                std::ptr::addr_of!((*p).magic).read(),
                std::ptr::addr_of!((*p).version).read(),
                std::ptr::addr_of!((*p).blocking).read(),
            )
        };
        assert_eq!(filled_size, *size as usize, "{layout:?}");
        assert_eq!(magic, NCCL_API_MAGIC, "{layout:?}");
        assert!(
            codes.contains(&(version as i32)),
            "{layout:?} stamps {version}"
        );
        assert_eq!(blocking, NCCL_CONFIG_UNDEF_INT, "{layout:?}");
        sizes.push(filled_size);
    }
    // grows at the end or not at all (2.26 put trafficClass in 2.19's tail padding: the same size)
    assert!(sizes.windows(2).all(|w| w[0] <= w[1]), "{sizes:?}");
    assert_eq!(*sizes.last().unwrap(), size_of::<ncclConfig_t>());
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
