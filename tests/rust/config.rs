//! Communicator options: `CommConfig` is written in the `ncclConfig_t` layout of the loaded
//! libnccl. An option newer than that library is an error naming the field and both
//! versions, before NCCL is called; options the library has reach ncclCommInitRankConfig.
//! Without a GPU NCCL fails at `cudaGetDevice`, before it reads the config (a garbage config
//! fails the same way), so only a GPU run shows NCCL accepting the struct; its size and
//! stamp are unit-tested in src/config.rs.

use ncclbind::sys::config_layouts::ConfigLayout;
use ncclbind::{library_info, CommConfig, Communicator, Error, Library, UniqueId, Version};

fn loaded() -> Version {
    library_info(Library::Nccl).unwrap().version
}

/// The first NCCL whose `ncclConfig_t` has `field`, as the IR says (sys::config_layouts).
fn first_with(field: &str) -> Version {
    let layout = ConfigLayout::first_with(field).expect("a field of ncclConfig_t");
    Version::from_nccl_code(layout.version_codes()[0])
}

/// Options the loaded libnccl has (commName from NCCL 2.27, as the IR says).
fn common_options() -> CommConfig {
    let mut config = CommConfig::default();
    config.blocking = Some(true);
    if loaded() >= first_with("commName") {
        config.comm_name = Some(c"config-test".into());
    }
    config.min_ctas = Some(1);
    config.max_ctas = Some(4);
    config.split_share = Some(false);
    config
}

/// Without a GPU NCCL stops at CUDA (ncclUnhandledCudaError); with one the communicator
/// comes up, so NCCL accepted the config.
fn assert_reaches_nccl(result: ncclbind::Result<Communicator>) {
    match result {
        Ok(comm) => {
            assert_eq!((comm.rank(), comm.size()), (0, 1));
            comm.finalize().unwrap();
        }
        Err(err) => {
            let Error::Nccl { function, .. } = &err else {
                panic!("not NCCL's error: {err}")
            };
            assert_eq!(*function, "ncclCommInitRankConfig");
            assert_eq!(err.name(), "ncclUnhandledCudaError", "{err}");
        }
    }
}

#[test]
fn options_the_loaded_library_has_reach_nccl() {
    let id = UniqueId::new().unwrap();
    assert_reaches_nccl(Communicator::init_rank_config(1, &id, 0, &common_options()));
}

#[test]
fn an_option_newer_than_the_loaded_library_is_an_error_before_nccl_or_reaches_it() {
    let mut config = common_options();
    config.max_p2p_peers = Some(4);
    let id = UniqueId::new().unwrap();
    let result = Communicator::init_rank_config(1, &id, 0, &config);
    let loaded = loaded();
    let since = first_with("maxP2pPeers");
    if loaded < since {
        let err = result.expect_err("maxP2pPeers is not in the loaded layout");
        assert_eq!(
            err,
            Error::ConfigFieldUnsupported {
                field: "maxP2pPeers",
                since,
                loaded,
            }
        );
        assert!(err.is_argument_error());
        let text = err.to_string();
        for expected in ["maxP2pPeers", &since.to_string(), &loaded.to_string()] {
            assert!(text.contains(expected), "{expected:?} missing from: {text}");
        }
    } else {
        assert_reaches_nccl(result);
    }
}

#[test]
fn init_rank_config_checks_ranks_before_the_config() {
    let id = UniqueId::from_bytes([0; 128]);
    let mut config = CommConfig::default();
    config.nvls_host_mode = Some(1);
    assert_eq!(
        Communicator::init_rank_config(2, &id, 2, &config).unwrap_err(),
        Error::RankOutOfRange {
            argument: "rank",
            rank: 2,
            nranks: 2
        }
    );
}

#[test]
fn values_outside_nccls_documented_ranges_are_errors_before_nccl() {
    let id = UniqueId::new().unwrap();
    for (cga, cta, field, value) in [
        (Some(-5), None, "cgaClusterSize", -5),
        (Some(9), None, "cgaClusterSize", 9),
        (Some(i32::MIN), None, "cgaClusterSize", i64::from(i32::MIN)),
        (None, Some(999), "CTAPolicy", 999),
        (None, Some(4), "CTAPolicy", 4),
    ] {
        let mut config = common_options();
        config.cga_cluster_size = cga;
        config.cta_policy = cta;
        let err = Communicator::init_rank_config(1, &id, 0, &config).unwrap_err();
        let Error::ConfigValueOutOfRange {
            record,
            field: got,
            value: given,
            ..
        } = &err
        else {
            panic!("{field} {value}: {err:?}")
        };
        assert_eq!((*record, *got, *given), ("ncclConfig_t", field, value));
        assert!(
            err.to_string()
                .contains(&format!("ncclConfig_t.{field} {value} is out of range")),
            "{err}"
        );
    }
}

#[test]
fn values_inside_the_documented_ranges_reach_nccl() {
    let id = UniqueId::new().unwrap();
    let has_cta_policy = loaded() >= first_with("CTAPolicy");
    for (cga, cta) in [(0, 0), (8, 1), (4, 2), (1, 3)] {
        let mut config = common_options();
        config.cga_cluster_size = Some(cga);
        config.cta_policy = has_cta_policy.then_some(cta);
        assert_reaches_nccl(Communicator::init_rank_config(1, &id, 0, &config));
    }
}
