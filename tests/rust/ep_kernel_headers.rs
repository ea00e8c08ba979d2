//! ncclbind::ep over the stand-ins with NCCL_HOME holding another NCCL release's headers than
//! the one libnccl_ep's run-time kernel compiles need (the IR's kernel_headers): the runtime
//! keeps the user's NCCL_HOME and reports a mismatch (ep::kernel_headers), and Group::create
//! refuses with Error::Ep naming NCCL_HOME and the runtime's message, before any NCCL EP call.
//! Its own process: NCCL_HOME is read once, when libnccl_ep loads. The versions come from the IR.

mod ep_stand_in;
mod ir;
mod stand_in;

use std::path::PathBuf;

use ncclbind::ep::{Group, GroupConfig, KernelHeaders, Problem};
use ncclbind::sys::nccl_ep::ncclEpAlgorithm_t;
use ncclbind::{ep, Communicator, Error, UniqueId};

const EP_IR: &str = include_str!("../../bindings/ir/api/nccl_ep.json");

/// A folder laid out as NCCL_HOME: include/nccl.h defining NCCL_VERSION_CODE as `code`.
fn nccl_home(code: i32) -> PathBuf {
    let scratch = std::env::var_os("TEST_TMPDIR")
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let home = scratch.join(format!("ep_kernel_headers_{}", std::process::id()));
    std::fs::create_dir_all(home.join("include")).unwrap();
    std::fs::write(
        home.join("include/nccl.h"),
        format!("#define NCCL_MAJOR 2\n#define NCCL_VERSION_CODE {code}\n"),
    )
    .unwrap();
    home
}

#[test]
fn group_create_refuses_a_nccl_home_of_another_release_before_nccl_ep() {
    let ep_ir = ir::Json::parse(EP_IR);
    let nccl_ir = ir::api();
    let ep_version = ir::versions(&ep_ir).pop().unwrap();
    let needed = ep_ir
        .get("kernel_headers")
        .and_then(|k| k.get(&ep_version))
        .expect("the IR names libnccl_ep's kernel headers");
    let needed_version = ir::str_at(needed, "version");
    let needed_code = ir::version_code(&nccl_ir, needed_version);
    let other = ir::versions(&nccl_ir)
        .into_iter()
        .find(|v| ir::version_code(&nccl_ir, v) != needed_code)
        .expect("another NCCL release");
    let home = nccl_home(ir::version_code(&nccl_ir, &other));
    // Before libnccl_ep loads (setup), in the test's only thread.
    std::env::set_var("NCCL_HOME", &home);

    let (fake, _serial) = ep_stand_in::setup();
    let (status, message) = ep::kernel_headers();
    assert_eq!(status, KernelHeaders::Mismatch, "{message}");
    assert_eq!(std::env::var_os("NCCL_HOME"), Some(home.clone().into()));
    for text in [
        format!("libnccl_ep {ep_version}"),
        format!("NCCL {needed_version}'s device headers"),
        format!("NCCL_HOME={} holds NCCL {other}'s headers", home.display()),
        "pip install --no-deps --target DIR nvidia-nccl-cu".to_owned(),
        format!("=={needed_version}, then NCCL_HOME=DIR/nvidia/nccl"),
    ] {
        assert!(message.contains(&text), "{text:?} not in {message}");
    }

    let comm = Communicator::init_rank(1, &UniqueId::new().unwrap(), 0).unwrap();
    fake.take_calls();
    let config = GroupConfig {
        algorithm: ncclEpAlgorithm_t::NCCL_EP_ALGO_LOW_LATENCY,
        num_experts: 8,
        max_dispatch_tokens_per_rank: 8,
        max_token_bytes: 2048,
        ..GroupConfig::default()
    };
    match Group::create(&comm, &config) {
        Err(Error::Ep {
            argument,
            problem,
            message: refused,
        }) => {
            assert_eq!(
                (argument.as_str(), problem),
                ("NCCL_HOME", Problem::KernelHeaders)
            );
            assert_eq!(refused, message);
        }
        other => panic!("expected Error::Ep naming NCCL_HOME, got {other:?}"),
    }
    assert_eq!(fake.take_calls(), Vec::<String>::new());
}
