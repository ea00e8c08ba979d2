//! Issue 14's Rust misuse cases, one per run: `hardening_cases <case>` prints CLEAN (the
//! error names what was wrong, before NCCL is called), ACCEPT (taken without an error) or
//! OTHER (another error), then the detail. bench/hardening_figures.py builds it against a
//! checkout's crate and runs each case in its own process over the stand-in libnccl
//! (NCCLBIND_NCCL_PATH), so a crash is counted too.

use std::ffi::CString;
use std::fmt::Display;

use ncclbind::{CommConfig, Communicator, DeviceSlice, DeviceSliceMut, UniqueId};

fn report<T, E: Display>(result: Result<T, E>, word: &str) {
    match result {
        Ok(_) => println!("ACCEPT"),
        Err(e) if e.to_string().contains(word) => println!("CLEAN {e}"),
        Err(e) => println!("OTHER {e}"),
    }
}

fn with_config(config: CommConfig, word: &str) {
    let result = UniqueId::new().and_then(|id| Communicator::init_rank_config(1, &id, 0, &config));
    report(result, word);
}

fn main() {
    let case = std::env::args().nth(1).unwrap_or_default();
    match case.as_str() {
        // SAFETY (all three): the views are made and dropped; nothing reads through them.
        "null DeviceSlice<f32>, 4 elements" => report(
            unsafe { DeviceSlice::<f32>::from_raw_parts(std::ptr::null(), 4) },
            "null",
        ),
        "null DeviceSliceMut<f32>, 4 elements" => report(
            unsafe { DeviceSliceMut::<f32>::from_raw_parts(std::ptr::null_mut(), 4) },
            "null",
        ),
        "DeviceSlice<f64> at 0x1001" => report(
            unsafe { DeviceSlice::<f64>::from_raw_parts(0x1001 as *const f64, 2) },
            "align",
        ),
        "CommConfig cga_cluster_size -5" => {
            let mut config = CommConfig::default();
            config.cga_cluster_size = Some(-5);
            with_config(config, "cgaClusterSize")
        }
        "CommConfig cta_policy 999" => {
            let mut config = CommConfig::default();
            config.cta_policy = Some(999);
            with_config(config, "CTAPolicy")
        }
        "CommConfig comm_name of 100 kB" => {
            let mut config = CommConfig::default();
            config.comm_name = Some(CString::new(vec![b'n'; 100_000]).unwrap());
            with_config(config, "commName")
        }
        _ => println!("OTHER no case {case:?}"),
    }
}
