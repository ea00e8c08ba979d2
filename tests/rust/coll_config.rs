//! Per-call configs (`CollConfig`, `ncclCollConfig_t`) and the properties record
//! (`ncclCommProperties_t`) against each header set's IR and each real libnccl: every layout
//! of the IR has its mirror, initializer and version codes; a `<collective>_config` call on
//! a libnccl older than its function's first release (from the IR) is
//! `Error::SymbolNotFound` naming both versions, on a newer one it reaches NCCL; an option
//! newer than the loaded layout is an error before NCCL. Without a GPU there is no
//! communicator, so the calls go to a null one, which NCCL rejects.

use ncclbind::sys::coll_config_layouts::{CollConfigLayout, RawCollConfigLayout};
use ncclbind::sys::comm_properties_layouts::{CommPropertiesLayout, RawCommPropertiesLayout};
use ncclbind::sys::nccl::*;
use ncclbind::{
    library_info, CollConfig, Communicator, DeviceSlice, DeviceSliceMut, Error, Library, RedOp,
    Stream, Version,
};

mod ir;

/// The version codes of each layout of `record` in the IR, oldest first, and each one's size.
fn ir_layouts(record: &str) -> Vec<(Vec<i32>, usize)> {
    let api = ir::api();
    let Some(ir::Json::Array(variants)) = api.get("record_variants").and_then(|v| v.get(record))
    else {
        panic!("the IR has no {record}")
    };
    variants
        .iter()
        .map(|variant| {
            let Some(ir::Json::Array(versions)) = variant.get("versions") else {
                panic!("a variant without versions")
            };
            let codes = versions
                .iter()
                .map(|v| match v {
                    ir::Json::String(v) => ir::version_code(&api, v),
                    other => panic!("{other:?}"),
                })
                .collect();
            let Some(ir::Json::Number(size)) = variant.get("record").and_then(|r| r.get("size"))
            else {
                panic!("a variant without a size")
            };
            (codes, *size as usize)
        })
        .collect()
}

/// The first NCCL with the function `name`, as the IR says.
fn since(name: &str) -> Version {
    let api = ir::api();
    let since = ir::str_at(ir::named(&api, "functions", name), "since");
    Version::from_nccl_code(ir::version_code(&api, since))
}

fn loaded() -> Version {
    library_info(Library::Nccl).unwrap().version
}

#[test]
fn each_coll_config_layout_of_the_ir_has_its_mirror_initializer_and_versions() {
    let layouts = ir_layouts("ncclCollConfig_t");
    assert_eq!(layouts.len(), CollConfigLayout::ALL.len());
    for ((codes, size), layout) in layouts.into_iter().zip(CollConfigLayout::ALL) {
        assert_eq!(layout.version_codes(), &codes[..], "{layout:?}");
        let mut raw = RawCollConfigLayout::new(layout);
        let p = raw.as_mut_ptr();
        // SAFETY: size, magic, version and minCTAs lead every layout; read in place.
        let (filled, magic, version, min_ctas) = unsafe {
            (
                std::ptr::addr_of!((*p).size).read(),
                std::ptr::addr_of!((*p).magic).read(),
                std::ptr::addr_of!((*p).version).read(),
                std::ptr::addr_of!((*p).minCTAs).read(),
            )
        };
        assert_eq!(filled, size, "{layout:?}");
        assert_eq!(magic, NCCL_API_MAGIC, "{layout:?}");
        assert!(
            codes.contains(&(version as i32)),
            "{layout:?} stamps {version}"
        );
        assert_eq!(min_ctas, NCCL_CONFIG_UNDEF_INT, "{layout:?}");
        // Every option CollConfig sets is a field of some layout.
        for field in [
            "minCTAs",
            "maxCTAs",
            "nvlsCTAs",
            "cgaClusterSize",
            "algSelection",
            "forceAlgSelection",
            "CTAPolicy",
            "userProfilerTag",
            "launchCompletionEvent",
        ] {
            assert!(CollConfigLayout::first_with(field).is_some(), "{field}");
        }
    }
}

#[test]
fn each_properties_layout_of_the_ir_converts_to_the_newest_keeping_its_fields() {
    let layouts = ir_layouts("ncclCommProperties_t");
    assert_eq!(layouts.len(), CommPropertiesLayout::ALL.len());
    for ((codes, size), layout) in layouts.into_iter().zip(CommPropertiesLayout::ALL) {
        assert_eq!(layout.version_codes(), &codes[..], "{layout:?}");
        let mut raw = RawCommPropertiesLayout::new(layout);
        let p = raw.as_mut_ptr();
        // SAFETY: size and version lead every layout; read in place.
        let filled = unsafe { std::ptr::addr_of!((*p).size).read() };
        assert_eq!(filled, size, "{layout:?}");
        *raw.int_field("rank").unwrap() = 3;
        *raw.int_field("nRanks").unwrap() = 4;
        *raw.version_mut() = codes[0] as _;
        let newest = raw.to_newest();
        assert_eq!((newest.rank, newest.nRanks), (3, 4), "{layout:?}");
        assert_eq!(newest.version as i32, codes[0], "{layout:?}");
        assert_eq!(newest.size, size_of::<ncclCommProperties_t>());
    }
}

/// A communicator NCCL rejects (null), for calls that must get as far as NCCL.
fn null_communicator() -> Communicator {
    // SAFETY: never destroyed (into_raw at the end of each test); NCCL rejects it.
    unsafe { Communicator::from_raw_parts(ncclComm_t::NULL, 0, 1) }
}

#[test]
fn a_config_collective_is_missing_before_its_release_and_reaches_nccl_after() {
    let comm = null_communicator();
    let host = [1.0f32; 4];
    let mut out = [0.0f32; 4];
    // SAFETY: NCCL rejects the null communicator before it touches these.
    let send = unsafe { DeviceSlice::from_raw_parts(host.as_ptr(), 4) }.unwrap();
    let mut recv = unsafe { DeviceSliceMut::from_raw_parts(out.as_mut_ptr(), 4) }.unwrap();
    let mut config = CollConfig::default();
    config.max_ctas = Some(2);
    let err = comm
        .all_reduce_config(
            &send,
            &mut recv,
            RedOp::SUM,
            Stream::LEGACY_DEFAULT,
            &config,
        )
        .unwrap_err();
    let (loaded, since) = (loaded(), since("ncclAllReduceConfig"));
    if loaded < since {
        let Error::SymbolNotFound { function, message } = &err else {
            panic!("{err:?}")
        };
        assert_eq!(*function, "ncclAllReduceConfig");
        for expected in [
            "ncclAllReduceConfig",
            &since.to_string(),
            &loaded.to_string(),
        ] {
            assert!(
                message.contains(expected),
                "{expected:?} missing from: {message}"
            );
        }
    } else {
        assert!(
            matches!(
                err,
                Error::Nccl {
                    function: "ncclAllReduceConfig",
                    ..
                }
            ),
            "{err:?}"
        );
    }
    comm.into_raw();
}

#[test]
fn an_option_newer_than_the_loaded_layout_is_an_error_before_nccl() {
    let comm = null_communicator();
    let mut buffer = [0.0f32; 4];
    // SAFETY: never touched: the config is refused first, or NCCL rejects the communicator.
    let mut view = unsafe { DeviceSliceMut::from_raw_parts(buffer.as_mut_ptr(), 4) }.unwrap();
    let mut config = CollConfig::default();
    // SAFETY: never recorded: the config is refused, or NCCL rejects the communicator first.
    unsafe { config.set_launch_completion_event(std::ptr::null_mut()) };
    let result =
        comm.all_reduce_in_place_config(&mut view, RedOp::SUM, Stream::LEGACY_DEFAULT, &config);
    let field_since = Version::from_nccl_code(
        CollConfigLayout::first_with("launchCompletionEvent")
            .unwrap()
            .version_codes()[0],
    );
    let loaded = loaded();
    if loaded < field_since {
        assert_eq!(
            result.unwrap_err(),
            Error::ConfigFieldUnsupported {
                field: "launchCompletionEvent",
                since: field_since,
                loaded,
            }
        );
    } else {
        assert!(matches!(result, Err(Error::Nccl { .. })), "{result:?}");
    }
    comm.into_raw();
}

#[test]
fn query_properties_is_missing_before_its_release_and_reaches_nccl_after() {
    let comm = null_communicator();
    let err = comm.query_properties().unwrap_err();
    let (loaded, since) = (loaded(), since("ncclCommQueryProperties"));
    if loaded < since {
        assert!(
            matches!(
                err,
                Error::SymbolNotFound {
                    function: "ncclCommQueryProperties",
                    ..
                }
            ),
            "{err:?}"
        );
    } else {
        assert!(
            matches!(
                err,
                Error::Nccl {
                    function: "ncclCommQueryProperties",
                    ..
                }
            ),
            "{err:?}"
        );
    }
    comm.into_raw();
}

#[test]
fn values_outside_nccls_documented_ranges_are_errors_before_nccl() {
    let comm = null_communicator();
    let mut buffer = [0.0f32; 4];
    // SAFETY: never touched: every config here is refused before NCCL is called.
    let mut view = unsafe { DeviceSliceMut::from_raw_parts(buffer.as_mut_ptr(), 4) }.unwrap();
    // (how to set the value, the field NCCL names it, the value)
    type Case = (fn(&mut CollConfig), &'static str, i64);
    let cases: [Case; 4] = [
        (|c| c.cga_cluster_size = Some(-5), "cgaClusterSize", -5),
        (|c| c.cga_cluster_size = Some(9), "cgaClusterSize", 9),
        (|c| c.cta_policy = Some(999), "CTAPolicy", 999),
        (|c| c.cta_policy = Some(-1), "CTAPolicy", -1),
    ];
    for (set, field, value) in cases {
        let mut config = CollConfig::default();
        set(&mut config);
        let err = comm
            .all_reduce_in_place_config(&mut view, RedOp::SUM, Stream::LEGACY_DEFAULT, &config)
            .unwrap_err();
        let Error::ConfigValueOutOfRange {
            record,
            field: got,
            value: given,
            ..
        } = err
        else {
            panic!("{field} {value}: {err:?}")
        };
        assert_eq!((record, got, given), ("ncclCollConfig_t", field, value));
        assert!(err.is_argument_error());
    }
    comm.into_raw();
}
