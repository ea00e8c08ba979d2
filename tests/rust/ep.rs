//! ncclbind::ep over the stand-ins: the stand-in libnccl (tests/python/fake_nccl.c) and the
//! stand-in libnccl_ep (tests/python/fake_nccl_ep.c, NCCLBIND_FAKE_NCCL_EP), which moves data on
//! host memory for one-rank LL expert-major groups and logs every call. Host memory stands in
//! for device memory. Each refusal is Error::Ep naming the argument and the rule, and reaches
//! no NCCL EP function (the log shows none); the same checks as Python's ncclbind.ep, from the
//! same spec. The versions come from the IR.

mod ep_stand_in;
mod ir;
mod stand_in;

use ep_stand_in::{setup, FakeEp};

use ncclbind::ep::{
    self, CombineConfig, CombineInputs, CombineOutputs, DispatchConfig, DispatchInputs,
    DispatchOutputs, Group, GroupConfig, KernelHeaders, LayoutInfo, Problem, Tensor,
};
use ncclbind::sys::nccl_ep::{
    ncclEpAlgorithm_t, ncclEpCombQuant_t, ncclEpDispQuant_t, ncclEpLayout_t,
};
use ncclbind::{
    library_info, Communicator, DeviceSlice, DeviceSliceMut, Error, Library, Stream, UniqueId,
    BF16, F16,
};

const EP_IR: &str = include_str!("../../bindings/ir/api/nccl_ep.json");

fn one_rank() -> Communicator {
    Communicator::init_rank(1, &UniqueId::new().unwrap(), 0).unwrap()
}

fn ll_config(experts: u32, max_tokens: u32, hidden: usize) -> GroupConfig {
    GroupConfig {
        algorithm: ncclEpAlgorithm_t::NCCL_EP_ALGO_LOW_LATENCY,
        num_experts: experts,
        max_dispatch_tokens_per_rank: max_tokens,
        max_token_bytes: (hidden * 4) as u32,
        ..GroupConfig::default()
    }
}

/// Host memory as device memory (the stand-ins run on the host).
struct Host<T> {
    data: Vec<T>,
}

impl<T: ncclbind::DataType + Copy + Default> Host<T> {
    fn new(values: Vec<T>) -> Host<T> {
        Host { data: values }
    }
    fn zeros(len: usize) -> Host<T> {
        Host {
            data: vec![T::default(); len],
        }
    }
    fn view(&self) -> DeviceSlice<'_, T> {
        // SAFETY: the stand-ins read host memory; it outlives the view.
        unsafe { DeviceSlice::from_raw_parts(self.data.as_ptr(), self.data.len()).unwrap() }
    }
    fn view_mut(&mut self) -> DeviceSliceMut<'_, T> {
        // SAFETY: as above.
        unsafe { DeviceSliceMut::from_raw_parts(self.data.as_mut_ptr(), self.data.len()).unwrap() }
    }
}

fn ep_error(result: Result<impl std::fmt::Debug, Error>) -> (String, Problem, String) {
    match result {
        Err(Error::Ep {
            argument,
            problem,
            message,
        }) => (argument, problem, message),
        other => panic!("expected Error::Ep, got {other:?}"),
    }
}

#[test]
fn get_version_is_the_ir_version_code() {
    let (_fake, _serial) = setup();
    let ep_ir = ir::Json::parse(EP_IR);
    let versions = ir::versions(&ep_ir);
    assert_eq!(
        ep::get_version().unwrap(),
        ir::version_code(&ep_ir, versions.last().unwrap())
    );
}

#[test]
fn kernel_headers_are_unset_over_the_stand_ins_and_groups_are_made() {
    let (fake, _serial) = setup();
    let ep_ir = ir::Json::parse(EP_IR);
    let version = ir::versions(&ep_ir).pop().unwrap();
    let needed = ep_ir
        .get("kernel_headers")
        .and_then(|k| k.get(&version))
        .expect("the IR names libnccl_ep's kernel headers");
    // The stand-ins lie in flat folders and NCCL_HOME is unset: no home to set it to.
    let (status, message) = ep::kernel_headers();
    assert_eq!(status, KernelHeaders::Unset, "{message}");
    for text in [
        format!("NCCL {}'s device headers", ir::str_at(needed, "version")),
        "NCCL_HOME is not set".to_owned(),
    ] {
        assert!(message.contains(&text), "{text:?} not in {message}");
    }
    // Not refused: a stand-in compiles no kernels (a real libnccl_ep's ncclInternalError then
    // carries the message).
    let comm = one_rank();
    Group::create(&comm, &ll_config(4, 4, 512))
        .unwrap()
        .destroy()
        .unwrap();
    assert_eq!(
        fake.take_calls()
            .iter()
            .map(|c| c.split(' ').next().unwrap())
            .collect::<Vec<_>>(),
        ["create_group", "group_destroy"]
    );
}

#[test]
fn ll_dispatch_and_combine_on_one_rank() {
    let (fake, _serial) = setup();
    let comm = one_rank();
    // hidden: LL combine takes multiples of 512 (the spec's limit)
    let (tokens, hidden, topk, experts) = (4usize, 512usize, 2usize, 4usize);
    let group = Group::create(&comm, &ll_config(experts as u32, tokens as u32, hidden)).unwrap();
    let x = Host::new(
        (0..tokens * hidden)
            .map(|i| (i / hidden + 1) as f32)
            .collect(),
    );
    let routing: Vec<i64> = (0..tokens)
        .flat_map(|t| [(t % experts) as i64, ((t + 1) % experts) as i64])
        .collect();
    let idx = Host::new(routing);
    let weights = Host::new(vec![0.25f32, 0.75].repeat(tokens));
    let mut recv = Host::<f32>::zeros(experts * tokens * hidden);
    let mut counts = Host::<i32>::zeros(experts);
    let mut combined = Host::<f32>::zeros(tokens * hidden);

    let (x_view, idx_view, w_view) = (x.view(), idx.view(), weights.view());
    let x_t = Tensor::new(&x_view, &[tokens, hidden], 0).unwrap();
    let idx_t = Tensor::new(&idx_view, &[tokens, topk], 0).unwrap();
    let w_t = Tensor::new(&w_view, &[tokens, topk], 0).unwrap();
    let mut recv_view = recv.view_mut();
    let recv_t = Tensor::new_mut(&mut recv_view, &[experts, tokens, hidden], 0).unwrap();
    let mut counts_view = counts.view_mut();
    let counts_t = Tensor::new_mut(&mut counts_view, &[experts], 0).unwrap();
    let mut combined_view = combined.view_mut();
    let combined_t = Tensor::new_mut(&mut combined_view, &[tokens, hidden], 0).unwrap();

    let stream = Stream::LEGACY_DEFAULT;
    let handle = group
        .create_handle(
            ncclEpLayout_t::NCCL_EP_LAYOUT_EXPERT_MAJOR,
            &idx_t,
            None,
            None,
            stream,
        )
        .unwrap();
    assert_eq!(handle.routing(), Some((tokens, topk)));
    handle
        .dispatch(
            &DispatchInputs {
                tokens: Some(&x_t),
                ..Default::default()
            },
            &DispatchOutputs {
                tokens: Some(&recv_t),
                ..Default::default()
            },
            Some(&LayoutInfo {
                expert_counters: Some(&counts_t),
                ..Default::default()
            }),
            None,
            stream,
        )
        .unwrap();
    handle
        .combine(
            &CombineInputs {
                tokens: Some(&recv_t),
                ..Default::default()
            },
            &CombineOutputs {
                tokens: Some(&combined_t),
                topk_weights: Some(&w_t),
            },
            None,
            stream,
        )
        .unwrap();
    drop((recv_t, counts_t, combined_t));
    drop((recv_view, counts_view, combined_view));
    assert_eq!(counts.data, vec![2; experts], "each expert gets two tokens");
    // Each token comes back summed over its two experts with weights 0.25 and 0.75: itself.
    assert_eq!(combined.data, x.data);
    let calls = fake.take_calls();
    assert!(
        calls.iter().any(|c| c.starts_with("dispatch ")),
        "{calls:?}"
    );
    assert!(calls.iter().any(|c| c.starts_with("combine ")), "{calls:?}");
    handle.destroy().unwrap();
    group.destroy().unwrap();
    // SAFETY: no arguments.
    assert_eq!(unsafe { (fake.used_after_free)() }, 0);
}

/// The error of a failed NCCL EP call (function, code, nccl_message).
fn nccl_error(result: Result<(), Error>) -> (&'static str, u32, String) {
    match result {
        Err(Error::Nccl {
            function,
            code,
            nccl_message,
            ..
        }) => (function, code, nccl_message),
        other => panic!("expected Error::Nccl, got {other:?}"),
    }
}

/// NCCL EP sets no error text, so a failed EP call carries NCCL's last error, which a warning
/// while the group was made may have set (on 2x H200, the GDRCopy one): a text unchanged since
/// the last group or handle was made is labelled not this call's (ep::STALE_LAST_ERROR, the text
/// quoted after it); a text set after it is reported as it is; the kernel headers' hint
/// (NCCL_HOME unset here) still follows an ncclInternalError.
#[test]
fn an_nccl_last_error_older_than_the_failed_call_says_so() {
    use std::ffi::{c_char, c_int, c_void, CString};
    type SetLastError = unsafe extern "C" fn(*const c_char);
    type FailNext = unsafe extern "C" fn(c_int);
    let (_fake, _serial) = setup();
    let nccl_hook = stand_in::hooks(&library_info(Library::Nccl).unwrap().path);
    let ep_hook = stand_in::hooks(&library_info(Library::NcclEp).unwrap().path);
    // SAFETY: the fake_nccl.c and fake_nccl_ep.c functions of these signatures.
    let (set_last_error, fail_next) = unsafe {
        (
            std::mem::transmute::<*mut c_void, SetLastError>(nccl_hook(c"fakeSetLastError")),
            std::mem::transmute::<*mut c_void, FailNext>(ep_hook(c"fakeEpFailNext")),
        )
    };
    let set = |text: &str| {
        let text = CString::new(text).unwrap();
        // SAFETY: NUL-terminated text, copied by the stand-in.
        unsafe { set_last_error(text.as_ptr()) }
    };
    // SAFETY: an int argument; the tests hold the lock that serializes them.
    let fail = |code: c_int| unsafe { fail_next(code) };
    let warning = "RMA/Socket : rma_socket requires GDRCopy; and GDR Copy is not available";
    let (status, hint) = ep::kernel_headers();
    assert_eq!(status, KernelHeaders::Unset, "{hint}");
    let stale = format!("{}\"{warning}\"", ep::STALE_LAST_ERROR);

    let comm = one_rank();
    let (tokens, hidden, topk, experts) = (4usize, 512usize, 2usize, 4usize);
    set(warning); // as if ncclEpCreateGroup had logged it
    let group = Group::create(&comm, &ll_config(experts as u32, tokens as u32, hidden)).unwrap();
    let x = Host::<f32>::zeros(tokens * hidden);
    let idx = Host::new(vec![0i64, 1].repeat(tokens));
    let mut recv = Host::<f32>::zeros(experts * tokens * hidden);
    let (x_view, idx_view) = (x.view(), idx.view());
    let x_t = Tensor::new(&x_view, &[tokens, hidden], 0).unwrap();
    let idx_t = Tensor::new(&idx_view, &[tokens, topk], 0).unwrap();
    let mut recv_view = recv.view_mut();
    let recv_t = Tensor::new_mut(&mut recv_view, &[experts, tokens, hidden], 0).unwrap();
    let stream = Stream::LEGACY_DEFAULT;
    let layout = ncclEpLayout_t::NCCL_EP_LAYOUT_EXPERT_MAJOR;
    let mut handle = group
        .create_handle(layout, &idx_t, None, None, stream)
        .unwrap();
    let dispatch = |handle: &ep::Handle<'_>| {
        handle.dispatch(
            &DispatchInputs {
                tokens: Some(&x_t),
                ..Default::default()
            },
            &DispatchOutputs {
                tokens: Some(&recv_t),
                ..Default::default()
            },
            None,
            None,
            stream,
        )
    };

    fail(3);
    let (function, code, message) = nccl_error(dispatch(&handle));
    assert_eq!((function, code), ("ncclEpDispatch", 3));
    assert_eq!(message, format!("{stale}\nhint: {hint}"));
    fail(3);
    let (function, _, message) = nccl_error(handle.update(&idx_t, None, stream));
    assert_eq!(function, "ncclEpUpdateHandle");
    assert_eq!(message, format!("{stale}\nhint: {hint}"));
    fail(5); // another code: no hint
    let (function, code, message) = nccl_error(handle.complete(None, stream));
    assert_eq!((function, code), ("ncclEpComplete", 5));
    assert_eq!(message, stale);
    // the library's own refusal (nothing staged: ncclInvalidUsage), with no text of its own
    assert_eq!(nccl_error(handle.complete(None, stream)).2, stale);

    let fresh = "fake: a fresh text, set after the handle was made";
    set(fresh);
    fail(3);
    let (_, _, message) = nccl_error(dispatch(&handle));
    assert_eq!(message, format!("{fresh}\nhint: {hint}"));
    let again = group.init_handle(layout, None, topk as i32, None).unwrap(); // made after it: now old
    fail(5);
    let error = dispatch(&handle).unwrap_err();
    assert_eq!(
        error.nccl_last_error(),
        format!("{}\"{fresh}\"", ep::STALE_LAST_ERROR)
    );
    assert!(
        error
            .to_string()
            .ends_with(&format!("not this call's: \"{fresh}\"")),
        "{error}"
    );
    drop(again);
    drop(handle);
    group.destroy().unwrap();
    set("");
}

/// The spec's LL combine limit (hidden a multiple of 512, libnccl_ep 0.2.0's ll_ep.cuh static
/// asserts): combine at hidden 256 is refused naming inputs.tokens before NCCL EP is called; the
/// same hidden passes dispatch (which the library accepts), and 512 passes combine.
#[test]
fn ll_combine_refuses_a_hidden_its_kernel_cannot_compile() {
    let (fake, _serial) = setup();
    let comm = one_rank();
    let (tokens, topk, experts) = (4usize, 2usize, 4usize);
    let group = Group::create(&comm, &ll_config(experts as u32, tokens as u32, 512)).unwrap();
    let idx = Host::new(
        (0..tokens)
            .flat_map(|t| [(t % experts) as i64, ((t + 1) % experts) as i64])
            .collect(),
    );
    let idx_view = idx.view();
    let idx_t = Tensor::new(&idx_view, &[tokens, topk], 0).unwrap();
    let weights = Host::new(vec![0.5f32; tokens * topk]);
    let w_view = weights.view();
    let w_t = Tensor::new(&w_view, &[tokens, topk], 0).unwrap();
    let stream = Stream::LEGACY_DEFAULT;
    let handle = group
        .create_handle(
            ncclEpLayout_t::NCCL_EP_LAYOUT_EXPERT_MAJOR,
            &idx_t,
            None,
            None,
            stream,
        )
        .unwrap();
    for hidden in [256usize, 512] {
        let x = Host::<f32>::zeros(tokens * hidden);
        let mut recv = Host::<f32>::zeros(experts * tokens * hidden);
        let mut counts = Host::<i32>::zeros(experts);
        let mut combined = Host::<f32>::zeros(tokens * hidden);
        let x_view = x.view();
        let x_t = Tensor::new(&x_view, &[tokens, hidden], 0).unwrap();
        let mut recv_view = recv.view_mut();
        let recv_t = Tensor::new_mut(&mut recv_view, &[experts, tokens, hidden], 0).unwrap();
        let mut counts_view = counts.view_mut();
        let counts_t = Tensor::new_mut(&mut counts_view, &[experts], 0).unwrap();
        let mut combined_view = combined.view_mut();
        let combined_t = Tensor::new_mut(&mut combined_view, &[tokens, hidden], 0).unwrap();
        fake.take_calls();
        handle
            .dispatch(
                &DispatchInputs {
                    tokens: Some(&x_t),
                    ..Default::default()
                },
                &DispatchOutputs {
                    tokens: Some(&recv_t),
                    ..Default::default()
                },
                Some(&LayoutInfo {
                    expert_counters: Some(&counts_t),
                    ..Default::default()
                }),
                None,
                stream,
            )
            .unwrap();
        let result = handle.combine(
            &CombineInputs {
                tokens: Some(&recv_t),
                ..Default::default()
            },
            &CombineOutputs {
                tokens: Some(&combined_t),
                topk_weights: Some(&w_t),
            },
            None,
            stream,
        );
        let calls = fake.take_calls();
        assert!(
            calls.iter().any(|c| c.starts_with("dispatch ")),
            "{calls:?}"
        );
        if hidden == 256 {
            let (argument, problem, message) = ep_error(result);
            assert_eq!(
                (argument.as_str(), problem),
                ("inputs.tokens", Problem::Limit)
            );
            assert!(
                message.contains("hidden = 256 is not a multiple of 512"),
                "{message}"
            );
            assert!(
                !calls.iter().any(|c| c.starts_with("combine ")),
                "{calls:?}"
            );
        } else {
            result.unwrap();
            assert!(calls.iter().any(|c| c.starts_with("combine ")), "{calls:?}");
        }
    }
    handle.destroy().unwrap();
    group.destroy().unwrap();
}

#[test]
fn group_config_and_limits_are_checked_before_nccl_ep() {
    let (fake, _serial) = setup();
    let comm = one_rank();
    let (argument, problem, _) = ep_error(Group::create(&comm, &ll_config(0, 8, 8)));
    assert_eq!(
        (argument.as_str(), problem),
        ("config.num_experts", Problem::Config)
    );
    let bad_algorithm = GroupConfig {
        algorithm: ncclEpAlgorithm_t(7),
        ..ll_config(4, 8, 8)
    };
    assert!(matches!(
        Group::create(&comm, &bad_algorithm),
        Err(Error::UnknownEnumValue {
            argument: "algorithm",
            value: 7,
            ..
        })
    ));
    // experts split evenly over the ranks: 2 ranks, 3 experts
    let two = Communicator::init_rank(2, &UniqueId::new().unwrap(), 0).unwrap();
    let (argument, problem, message) = ep_error(Group::create(&two, &ll_config(3, 8, 8)));
    assert_eq!((argument.as_str(), problem), ("config", Problem::Limit));
    assert!(
        message.contains("num_experts = 3 is not a multiple of num_ranks = 2"),
        "{message}"
    );
    assert!(!fake
        .take_calls()
        .iter()
        .any(|c| c.starts_with("create_group")));
}

#[test]
fn routing_is_checked_against_the_group() {
    let (fake, _serial) = setup();
    let comm = one_rank();
    let group = Group::create(&comm, &ll_config(4, 8, 8)).unwrap();
    fake.take_calls();
    let em = ncclEpLayout_t::NCCL_EP_LAYOUT_EXPERT_MAJOR;
    let s = Stream::LEGACY_DEFAULT;
    let idx = Host::<i64>::zeros(9 * 5);
    let view = idx.view();
    // top-k above the expert count
    let t = Tensor::new(&view, &[9, 5], 0).unwrap();
    let (argument, problem, message) = ep_error(group.create_handle(em, &t, None, None, s));
    assert_eq!((argument.as_str(), problem), ("topk_idx", Problem::Limit));
    assert!(
        message.contains("top_k = 5 is above num_experts = 4"),
        "{message}"
    );
    // more tokens than the group's maximum
    let t = Tensor::new(&view, &[15, 3], 0).unwrap();
    let (_, problem, message) = ep_error(group.create_handle(em, &t, None, None, s));
    assert_eq!(problem, Problem::Limit);
    assert!(
        message.contains("num_tokens = 15 is above max_dispatch_tokens_per_rank = 8"),
        "{message}"
    );
    // rank and element type
    let flat = Host::<i64>::zeros(4);
    let flat_view = flat.view();
    let t = Tensor::new(&flat_view, &[4], 0).unwrap();
    let (argument, problem, message) = ep_error(group.create_handle(em, &t, None, None, s));
    assert_eq!((argument.as_str(), problem), ("topk_idx", Problem::Shape));
    assert!(
        message.contains("1-D tensor of shape [4], expected 2-D [num_tokens, top_k]"),
        "{message}"
    );
    let floats = Host::<f32>::zeros(8);
    let floats_view = floats.view();
    let t = Tensor::new(&floats_view, &[4, 2], 0).unwrap();
    let (argument, problem, _) = ep_error(group.create_handle(em, &t, None, None, s));
    assert_eq!(
        (argument.as_str(), problem),
        ("topk_idx", Problem::DataType)
    );
    // another device than the group's
    let view2 = Host::<i64>::zeros(8);
    let v2 = view2.view();
    let t2 = Tensor::new(&v2, &[4, 2], group.device() + 1).unwrap();
    let (argument, problem, _) = ep_error(group.create_handle(em, &t2, None, None, s));
    assert_eq!((argument.as_str(), problem), ("topk_idx", Problem::Device));
    // a layout of the other algorithm, and no layout at all
    let t = Tensor::new(&v2, &[4, 2], 0).unwrap();
    let (argument, problem, _) =
        ep_error(group.create_handle(ncclEpLayout_t::NCCL_EP_LAYOUT_FLAT, &t, None, None, s));
    assert_eq!((argument.as_str(), problem), ("layout", Problem::Value));
    assert!(matches!(
        group.create_handle(ncclEpLayout_t(42), &t, None, None, s),
        Err(Error::UnknownEnumValue {
            argument: "layout",
            value: 42,
            ..
        })
    ));
    assert_eq!(
        fake.take_calls(),
        Vec::<String>::new(),
        "no refusal reached NCCL EP"
    );
}

#[test]
fn dispatch_tensors_are_checked_by_mode_and_shape() {
    let (fake, _serial) = setup();
    let comm = one_rank();
    let (tokens, hidden, experts) = (4usize, 8usize, 4usize);
    let group = Group::create(&comm, &ll_config(experts as u32, tokens as u32, hidden)).unwrap();
    let idx = Host::<i64>::new((0..tokens as i64 * 2).map(|i| i % experts as i64).collect());
    let idx_view = idx.view();
    let idx_t = Tensor::new(&idx_view, &[tokens, 2], 0).unwrap();
    let s = Stream::LEGACY_DEFAULT;
    let handle = group
        .create_handle(
            ncclEpLayout_t::NCCL_EP_LAYOUT_EXPERT_MAJOR,
            &idx_t,
            None,
            None,
            s,
        )
        .unwrap();
    fake.take_calls();
    let x = Host::<f32>::zeros(tokens * hidden);
    let x_view = x.view();
    let x_t = Tensor::new(&x_view, &[tokens, hidden], 0).unwrap();
    let recv = Host::<f32>::zeros(experts * tokens * hidden);
    let recv_view = recv.view();
    let input = DispatchInputs {
        tokens: Some(&x_t),
        ..Default::default()
    };

    // LL expert-major output is [local experts, ranks x max tokens, hidden]
    let flat = Tensor::new(&recv_view, &[experts * tokens, hidden], 0).unwrap();
    let (argument, problem, message) = ep_error(handle.dispatch(
        &input,
        &DispatchOutputs {
            tokens: Some(&flat),
            ..Default::default()
        },
        None,
        None,
        s,
    ));
    assert_eq!(
        (argument.as_str(), problem),
        ("outputs.tokens", Problem::Shape)
    );
    assert!(
        message.contains("num_local_experts, num_ranks * max_dispatch_tokens_per_rank, hidden"),
        "{message}"
    );
    // hidden bound by inputs.tokens: a wider output row disagrees
    let wide = Host::<f32>::zeros(experts * tokens * hidden * 2);
    let wide_view = wide.view();
    let wide_t = Tensor::new(&wide_view, &[experts, tokens, hidden * 2], 0).unwrap();
    let (argument, _, message) = ep_error(handle.dispatch(
        &input,
        &DispatchOutputs {
            tokens: Some(&wide_t),
            ..Default::default()
        },
        None,
        None,
        s,
    ));
    assert_eq!(argument, "outputs.tokens");
    assert!(message.contains(&format!("hidden = {hidden}")), "{message}");
    // a tensor the mode does not use, and a required one missing
    let out = Tensor::new(&recv_view, &[experts, tokens, hidden], 0).unwrap();
    let ids = Host::<i64>::zeros(tokens * 2);
    let ids_view = ids.view();
    let ids_t = Tensor::new(&ids_view, &[1, tokens, 2], 0).unwrap();
    let (argument, problem, _) = ep_error(handle.dispatch(
        &input,
        &DispatchOutputs {
            tokens: Some(&out),
            topk_idx: Some(&ids_t),
            ..Default::default()
        },
        None,
        None,
        s,
    ));
    assert_eq!(
        (argument.as_str(), problem),
        ("outputs.topk_idx", Problem::NotInMode)
    );
    let (argument, problem, _) = ep_error(handle.dispatch(
        &DispatchInputs::default(),
        &DispatchOutputs {
            tokens: Some(&out),
            ..Default::default()
        },
        None,
        None,
        s,
    ));
    assert_eq!(
        (argument.as_str(), problem),
        ("inputs.tokens", Problem::Missing)
    );
    assert_eq!(
        fake.take_calls(),
        Vec::<String>::new(),
        "no refusal reached NCCL EP"
    );
}

#[test]
fn update_rebinds_the_routing_and_drop_destroys() {
    let (fake, _serial) = setup();
    let comm = one_rank();
    let group = Group::create(&comm, &ll_config(4, 8, 8)).unwrap();
    let idx = Host::<i32>::zeros(8 * 3);
    let view = idx.view();
    let first = Tensor::new(&view, &[8, 3], 0).unwrap();
    let s = Stream::LEGACY_DEFAULT;
    let mut handle = group
        .create_handle(
            ncclEpLayout_t::NCCL_EP_LAYOUT_EXPERT_MAJOR,
            &first,
            None,
            None,
            s,
        )
        .unwrap();
    let second = Tensor::new(&view, &[6, 4], 0).unwrap();
    handle.update(&second, None, s).unwrap();
    assert_eq!(handle.routing(), Some((6, 4)));
    let too_many = Tensor::new(&view, &[24, 1], 0).unwrap();
    assert_eq!(
        ep_error(handle.update(&too_many, None, s)).1,
        Problem::Limit
    );
    assert_eq!(
        handle.routing(),
        Some((6, 4)),
        "a refused update leaves the routing"
    );
    fake.take_calls();
    drop(handle);
    drop(group);
    let calls = fake.take_calls();
    assert!(
        calls[0].starts_with("handle_destroy ") && calls[1].starts_with("group_destroy "),
        "{calls:?}"
    );
    // SAFETY: no arguments.
    assert_eq!(unsafe { (fake.used_after_free)() }, 0);
}

#[test]
fn a_tensor_shape_must_cover_its_memory() {
    let memory = Host::<f32>::zeros(12);
    let view = memory.view();
    assert_eq!(ep_error(Tensor::new(&view, &[5, 2], 0)).1, Problem::Shape);
    assert_eq!(ep_error(Tensor::new(&view, &[], 0)).1, Problem::Shape);
    assert_eq!(Tensor::new(&view, &[3, 4], 0).unwrap().shape(), &[3, 4]);
}

/// The modes where libnccl_ep 0.2.0 asserts one element type (a C assert: a wrong one would
/// abort the process): the wrong one is Problem::DataType naming the argument, the expected type
/// and the mode, before any NCCL EP call; the right one reaches NCCL EP.
#[test]
fn received_ids_and_counters_take_the_element_type_of_the_mode() {
    let (fake, _serial) = setup();
    let comm = one_rank();
    let (tokens, hidden, experts, top_k) = (4usize, 8usize, 4usize, 2usize);
    let slots = experts * tokens;
    let s = Stream::LEGACY_DEFAULT;
    let idx = Host::<i64>::new(
        (0..(tokens * top_k) as i64)
            .map(|i| i % experts as i64)
            .collect(),
    );
    let idx_view = idx.view();
    let idx_t = Tensor::new(&idx_view, &[tokens, top_k], 0).unwrap();
    let x = Host::<f32>::zeros(tokens * hidden);
    let x_view = x.view();
    let x_t = Tensor::new(&x_view, &[tokens, hidden], 0).unwrap();
    let input = DispatchInputs {
        tokens: Some(&x_t),
        ..Default::default()
    };
    let recv = Host::<f32>::zeros(slots * hidden);
    let recv_view = recv.view();
    let recv_one = Host::<f32>::zeros(tokens * hidden);
    let recv_one_view = recv_one.view();
    let (ids32, ids64) = (
        Host::<i32>::zeros(slots * top_k),
        Host::<i64>::zeros(slots * top_k),
    );
    let (ids32_view, ids64_view) = (ids32.view(), ids64.view());
    let (rank_ids32, rank_ids64) = (
        Host::<i32>::zeros(tokens * top_k),
        Host::<i64>::zeros(tokens * top_k),
    );
    let (rank_ids32_view, rank_ids64_view) = (rank_ids32.view(), rank_ids64.view());
    let (c32, c64) = (Host::<i32>::zeros(experts), Host::<i64>::zeros(experts));
    let (c32_view, c64_view) = (c32.view(), c64.view());
    let counters32 = Tensor::new(&c32_view, &[experts], 0).unwrap();
    let counters64 = Tensor::new(&c64_view, &[experts], 0).unwrap();
    let refused = |result: Result<(), Error>, argument: &str, expected: &str| {
        let (got, problem, message) = ep_error(result);
        assert_eq!(
            (got.as_str(), problem),
            (argument, Problem::DataType),
            "{message}"
        );
        assert!(message.contains(expected), "{message}");
        assert_eq!(
            fake.take_calls(),
            Vec::<String>::new(),
            "no refusal reached NCCL EP"
        );
    };
    let reached = |result: Result<(), Error>, call: &str| fake.assert_reached(result, call);

    // LL rank-major: received ids int32
    let group = Group::create(&comm, &ll_config(experts as u32, tokens as u32, hidden)).unwrap();
    let handle = group
        .create_handle(
            ncclEpLayout_t::NCCL_EP_LAYOUT_RANK_MAJOR,
            &idx_t,
            None,
            None,
            s,
        )
        .unwrap();
    let recv_rm = Tensor::new(&recv_one_view, &[1, tokens, hidden], 0).unwrap();
    let dispatch_ids = |ids: &Tensor<'_>| {
        handle.dispatch(
            &input,
            &DispatchOutputs {
                tokens: Some(&recv_rm),
                topk_idx: Some(ids),
                ..Default::default()
            },
            None,
            None,
            s,
        )
    };
    fake.take_calls();
    let wrong = Tensor::new(&rank_ids64_view, &[1, tokens, top_k], 0).unwrap();
    refused(
        dispatch_ids(&wrong),
        "outputs.topk_idx",
        "expected int32 in ll_rank_major",
    );
    let right = Tensor::new(&rank_ids32_view, &[1, tokens, top_k], 0).unwrap();
    reached(dispatch_ids(&right), "dispatch");
    drop(handle);

    // LL expert-major: expert counters int32 at dispatch
    let handle = group
        .create_handle(
            ncclEpLayout_t::NCCL_EP_LAYOUT_EXPERT_MAJOR,
            &idx_t,
            None,
            None,
            s,
        )
        .unwrap();
    let recv_em = Tensor::new(&recv_view, &[experts, tokens, hidden], 0).unwrap();
    let dispatch_counters = |counters: &Tensor<'_>| {
        handle.dispatch(
            &input,
            &DispatchOutputs {
                tokens: Some(&recv_em),
                ..Default::default()
            },
            Some(&LayoutInfo {
                expert_counters: Some(counters),
                ..LayoutInfo::default()
            }),
            None,
            s,
        )
    };
    fake.take_calls();
    refused(
        dispatch_counters(&counters64),
        "layout_info.expert_counters",
        "expected int32 in ll_expert_major",
    );
    reached(dispatch_counters(&counters32), "dispatch");
    drop(handle);
    drop(group);

    // HT flat: expert counters int32 at handle time, received ids int64 at dispatch
    let ht = GroupConfig {
        algorithm: ncclEpAlgorithm_t::NCCL_EP_ALGO_HIGH_THROUGHPUT,
        max_recv_tokens_per_rank: slots as u32,
        ..ll_config(experts as u32, tokens as u32, hidden)
    };
    let group = Group::create(&comm, &ht).unwrap();
    let flat_handle = |counters: &Tensor<'_>| {
        group
            .create_handle(
                ncclEpLayout_t::NCCL_EP_LAYOUT_FLAT,
                &idx_t,
                Some(&LayoutInfo {
                    expert_counters: Some(counters),
                    ..LayoutInfo::default()
                }),
                None,
                s,
            )
            .map(drop)
    };
    fake.take_calls();
    refused(
        flat_handle(&counters64),
        "layout_info.expert_counters",
        "expected int32 in ht_flat",
    );
    reached(flat_handle(&counters32), "create_handle");
    let handle = group
        .create_handle(ncclEpLayout_t::NCCL_EP_LAYOUT_FLAT, &idx_t, None, None, s)
        .unwrap();
    let recv_flat = Tensor::new(&recv_view, &[slots, hidden], 0).unwrap();
    let dispatch_flat = |ids: &Tensor<'_>| {
        handle.dispatch(
            &input,
            &DispatchOutputs {
                tokens: Some(&recv_flat),
                topk_idx: Some(ids),
                ..Default::default()
            },
            None,
            None,
            s,
        )
    };
    fake.take_calls();
    let wrong = Tensor::new(&ids32_view, &[slots, top_k], 0).unwrap();
    refused(
        dispatch_flat(&wrong),
        "outputs.topk_idx",
        "expected int64 in ht_flat",
    );
    let right = Tensor::new(&ids64_view, &[slots, top_k], 0).unwrap();
    reached(dispatch_flat(&right), "dispatch");
}

/// The five mask calls of a group without the `mask` precondition (an LL group made with
/// enable_mask): Error::Ep naming the group, the method and the precondition, and no NCCL EP
/// call (the stand-in, as libnccl_ep 0.2.0, would abort the process).
fn mask_calls_refused(fake: &FakeEp, group: &Group<'_>, state: &str) {
    let status = Host::<i32>::zeros(1);
    let view = status.view();
    let status = Tensor::new(&view, &[1], 0).unwrap();
    let s = Stream::LEGACY_DEFAULT;
    let results: [(&str, Result<(), Error>); 5] = [
        ("mask_query", group.mask_query(&status, s)),
        ("mask_update", group.mask_update(&[1], s)),
        ("mask_clean", group.mask_clean(s)),
        ("get_async_error", group.get_async_error().map(drop)),
        ("error_clear", group.error_clear()),
    ];
    for (method, result) in results {
        let (argument, problem, message) = ep_error(result);
        assert_eq!(
            (argument.as_str(), problem),
            ("group", Problem::Precondition)
        );
        assert!(
            message.starts_with(&format!(
                "{method} needs a low-latency group created with GroupConfig(enable_mask=1)"
            )) && message.ends_with(&format!("(precondition mask); this group {state}")),
            "{message}"
        );
    }
    assert_eq!(fake.take_calls(), Vec::<String>::new());
}

#[test]
fn mask_calls_need_a_low_latency_group_with_enable_mask() {
    let (fake, _serial) = setup();
    let comm = one_rank();
    let group = Group::create(&comm, &ll_config(4, 8, 512)).unwrap();
    assert!(group.preconditions().is_empty());
    fake.take_calls();
    mask_calls_refused(fake, &group, "has GroupConfig.enable_mask = 0");
    drop(group);
    let ht = GroupConfig {
        algorithm: ncclEpAlgorithm_t::NCCL_EP_ALGO_HIGH_THROUGHPUT,
        max_recv_tokens_per_rank: 8,
        enable_mask: 1,
        ..ll_config(4, 8, 512)
    };
    let group = Group::create(&comm, &ht).unwrap();
    fake.take_calls();
    mask_calls_refused(fake, &group, "is HT");
}

#[test]
fn mask_clean_needs_the_rdma_buffer_a_handle_makes() {
    let (fake, _serial) = setup();
    let comm = one_rank();
    let s = Stream::LEGACY_DEFAULT;
    let masked = GroupConfig {
        enable_mask: 1,
        ..ll_config(4, 8, 512)
    };
    let group = Group::create(&comm, &masked).unwrap();
    assert_eq!(group.preconditions(), ["mask"]);
    fake.take_calls();
    let (argument, problem, message) = ep_error(group.mask_clean(s));
    assert_eq!(
        (argument.as_str(), problem),
        ("group", Problem::Precondition)
    );
    assert!(
        message.starts_with("mask_clean needs the low-latency group's RDMA buffer")
            && message.ends_with(
                "(precondition rdma_buffer); this group has GroupConfig.rdma_buffer_size = 0 \
                 and no create_handle or init_handle has succeeded on it"
            ),
        "{message}"
    );
    assert_eq!(fake.take_calls(), Vec::<String>::new());
    // the other mask calls need the mask only
    group.mask_update(&[1], s).unwrap();
    assert_eq!(group.get_async_error().unwrap(), 0);

    // a handle NCCL EP refuses (LL takes no layout_info) makes no buffer
    let idx = Host::<i64>::zeros(4 * 2);
    let view = idx.view();
    let routing = Tensor::new(&view, &[4, 2], 0).unwrap();
    let layout = ncclEpLayout_t::NCCL_EP_LAYOUT_EXPERT_MAJOR;
    let refused_by_library = group
        .create_handle(layout, &routing, Some(&LayoutInfo::default()), None, s)
        .map(drop);
    assert!(
        matches!(refused_by_library, Err(Error::Nccl { .. })),
        "{refused_by_library:?}"
    );
    assert_eq!(ep_error(group.mask_clean(s)).1, Problem::Precondition);
    drop(
        group
            .create_handle(layout, &routing, None, None, s)
            .unwrap(),
    );
    assert_eq!(group.preconditions(), ["mask", "rdma_buffer"]);
    fake.take_calls();
    group.mask_clean(s).unwrap(); // the buffer outlives the handle that made it
    assert_eq!(fake.take_calls().len(), 1);
    drop(group);

    let group = Group::create(&comm, &masked).unwrap();
    drop(group.init_handle(layout, None, 2, None).unwrap());
    group.mask_clean(s).unwrap();
    drop(group);

    let explicit = GroupConfig {
        rdma_buffer_size: 1 << 20,
        ..masked
    };
    let group = Group::create(&comm, &explicit).unwrap();
    assert_eq!(group.preconditions(), ["mask", "rdma_buffer"]); // allocated at creation
    group.mask_clean(s).unwrap();
}

/// The spec's [[row_bytes]]: a token row in transit, as the call's quantization recipe makes it,
/// must fit the group's `max_token_bytes` (NCCL EP sizes its buffers by it; libnccl_ep 0.2.0
/// asserts it for unquantized rows, ending the process). NONE: hidden x the element size, for
/// dispatch and combine; QUANT_FWD: token and scale rows; DS_FP8E3M4: one byte per element and a
/// float32 scale per 128 elements. A row one byte over is Error::Ep naming inputs.tokens with
/// Problem::Limit, and reaches no NCCL EP function; a row of exactly the budget runs.
#[test]
fn token_rows_above_max_token_bytes_are_refused_before_nccl_ep() {
    let (fake, _serial) = setup();
    let comm = one_rank();
    let s = Stream::LEGACY_DEFAULT;
    let (tokens, topk, experts, hidden, scale_elems) = (4usize, 2usize, 4usize, 512usize, 4usize);
    let rows = experts * tokens;
    let idx = Host::new(
        (0..tokens)
            .flat_map(|t| [(t % experts) as i64, ((t + 1) % experts) as i64])
            .collect(),
    );
    let weights = Host::new(vec![0.5f32; tokens * topk]);
    let (x32, x16, xbf) = (
        Host::<f32>::zeros(tokens * hidden),
        Host::<F16>::zeros(tokens * hidden),
        Host::<BF16>::zeros(tokens * hidden),
    );
    let scales = Host::<f32>::zeros(tokens * scale_elems);
    let (mut recv32, mut recv16, mut recv8) = (
        Host::<f32>::zeros(rows * hidden),
        Host::<F16>::zeros(rows * hidden),
        Host::<u8>::zeros(rows * hidden),
    );
    let mut recv_scales = Host::<f32>::zeros(rows * scale_elems);
    let mut ds_scales = Host::<f32>::zeros(rows * hidden / 128);
    let (mut out32, mut out16) = (
        Host::<f32>::zeros(tokens * hidden),
        Host::<F16>::zeros(tokens * hidden),
    );
    let (idx_view, w_view) = (idx.view(), weights.view());
    let (x32_view, x16_view, xbf_view, scales_view) =
        (x32.view(), x16.view(), xbf.view(), scales.view());
    let (mut recv32_view, mut recv16_view, mut recv8_view) =
        (recv32.view_mut(), recv16.view_mut(), recv8.view_mut());
    let (mut recv_scales_view, mut ds_scales_view) = (recv_scales.view_mut(), ds_scales.view_mut());
    let (mut out32_view, mut out16_view) = (out32.view_mut(), out16.view_mut());
    let idx_t = Tensor::new(&idx_view, &[tokens, topk], 0).unwrap();
    let w_t = Tensor::new(&w_view, &[tokens, topk], 0).unwrap();
    let x32_t = Tensor::new(&x32_view, &[tokens, hidden], 0).unwrap();
    let x16_t = Tensor::new(&x16_view, &[tokens, hidden], 0).unwrap();
    let xbf_t = Tensor::new(&xbf_view, &[tokens, hidden], 0).unwrap();
    let scales_t = Tensor::new(&scales_view, &[tokens, scale_elems], 0).unwrap();
    let received = [experts, tokens, hidden];
    let recv32_t = Tensor::new_mut(&mut recv32_view, &received, 0).unwrap();
    let recv16_t = Tensor::new_mut(&mut recv16_view, &received, 0).unwrap();
    let recv8_t = Tensor::new_mut(&mut recv8_view, &received, 0).unwrap();
    let recv_scales_t =
        Tensor::new_mut(&mut recv_scales_view, &[experts, tokens, scale_elems], 0).unwrap();
    let ds_scales_t =
        Tensor::new_mut(&mut ds_scales_view, &[experts, tokens, hidden / 128], 0).unwrap();
    let out32_t = Tensor::new_mut(&mut out32_view, &[tokens, hidden], 0).unwrap();
    let out16_t = Tensor::new_mut(&mut out16_view, &[tokens, hidden], 0).unwrap();

    let refused = |result: Result<(), Error>, expected: &[String]| {
        let (argument, problem, message) = ep_error(result);
        assert_eq!(
            (argument.as_str(), problem),
            ("inputs.tokens", Problem::Limit),
            "{message}"
        );
        for text in expected {
            assert!(message.contains(text.as_str()), "{text:?} not in {message}");
        }
        assert!(message.contains("GroupConfig.max_token_bytes"), "{message}");
        assert_eq!(
            fake.take_calls(),
            Vec::<String>::new(),
            "no refusal reached NCCL EP"
        );
    };
    let reached = |result: Result<(), Error>, call: &str| fake.assert_reached(result, call);
    let budget_group = |budget: usize| {
        let config = GroupConfig {
            max_token_bytes: budget as u32,
            ..ll_config(experts as u32, tokens as u32, hidden)
        };
        Group::create(&comm, &config).unwrap()
    };
    let em = ncclEpLayout_t::NCCL_EP_LAYOUT_EXPERT_MAJOR;
    let dispatch_config = |recipe| DispatchConfig {
        quant_recipe: recipe,
        ..DispatchConfig::default()
    };
    let (none, fwd, ds) = (
        dispatch_config(ncclEpDispQuant_t::NCCL_EP_DISP_QUANT_NONE),
        dispatch_config(ncclEpDispQuant_t::NCCL_EP_DISP_QUANT_FWD),
        dispatch_config(ncclEpDispQuant_t::NCCL_EP_DISP_QUANT_DS_FP8E3M4),
    );

    // NONE (no config, or the default one): dispatch's and combine's input rows
    let group = budget_group(hidden * 2);
    let handle = group.create_handle(em, &idx_t, None, None, s).unwrap();
    fake.take_calls();
    let dispatch = |x: &Tensor<'_>, recv: &Tensor<'_>, config: Option<&DispatchConfig>| {
        handle.dispatch(
            &DispatchInputs {
                tokens: Some(x),
                ..Default::default()
            },
            &DispatchOutputs {
                tokens: Some(recv),
                ..Default::default()
            },
            None,
            config,
            s,
        )
    };
    let wide = [
        format!(
            "token row bytes = {} is above max_token_bytes = {}",
            hidden * 4,
            hidden * 2
        ),
        format!(
            "(config.quant_recipe NCCL_EP_DISP_QUANT_NONE: inputs.tokens {hidden} x float32 (4 B);"
        ),
    ];
    for _ in 0..2 {
        refused(dispatch(&x32_t, &recv32_t, None), &wide);
        refused(dispatch(&x32_t, &recv32_t, Some(&none)), &wide);
    }
    reached(dispatch(&x16_t, &recv16_t, None), "dispatch ");
    let combine = |recv: &Tensor<'_>, out: &Tensor<'_>, config: Option<&CombineConfig>| {
        handle.combine(
            &CombineInputs {
                tokens: Some(recv),
                ..Default::default()
            },
            &CombineOutputs {
                tokens: Some(out),
                topk_weights: Some(&w_t),
            },
            config,
            s,
        )
    };
    refused(
        combine(&recv32_t, &out32_t, None),
        &[format!(
            "token row bytes = {} is above max_token_bytes = {} (config.quant_recipe \
             NCCL_EP_COMB_QUANT_NONE: inputs.tokens {hidden} x float32 (4 B);",
            hidden * 4,
            hidden * 2
        )],
    );
    reached(combine(&recv16_t, &out16_t, None), "combine ");
    // NVFP4 (experimental): its transported row is not in the header, so not checked
    let nvfp4 = CombineConfig {
        quant_recipe: ncclEpCombQuant_t::NCCL_EP_COMB_QUANT_NVFP4,
        ..CombineConfig::default()
    };
    reached(combine(&recv32_t, &out32_t, Some(&nvfp4)), "combine ");
    drop(handle);
    drop(group);

    // the recipes: QUANT_FWD's float16 rows and float32 scales; DS_FP8E3M4 of bfloat16 rows
    let fwd_row = hidden * 2 + scale_elems * 4;
    let ds_row = hidden + hidden / 128 * 4;
    for (budget, fwd_fits, ds_fits, none_fits) in [
        (fwd_row - 1, false, true, true),
        (fwd_row, true, true, true),
        (ds_row, false, true, false),
        (ds_row - 1, false, false, false),
    ] {
        let group = budget_group(budget);
        let handle = group.create_handle(em, &idx_t, None, None, s).unwrap();
        fake.take_calls();
        let fwd_call = handle.dispatch(
            &DispatchInputs {
                tokens: Some(&x16_t),
                scales: Some(&scales_t),
                ..Default::default()
            },
            &DispatchOutputs {
                tokens: Some(&recv16_t),
                scales: Some(&recv_scales_t),
                ..Default::default()
            },
            None,
            Some(&fwd),
            s,
        );
        if fwd_fits {
            reached(fwd_call, "dispatch ");
        } else {
            refused(
                fwd_call,
                &[
                    format!("token row bytes = {fwd_row} is above max_token_bytes = {budget}"),
                    format!(
                        "NCCL_EP_DISP_QUANT_FWD: inputs.tokens {hidden} x float16 (2 B) + \
                         inputs.scales {scale_elems} x float32 (4 B);"
                    ),
                ],
            );
        }
        let ds_call = |config: &DispatchConfig| {
            handle.dispatch(
                &DispatchInputs {
                    tokens: Some(&xbf_t),
                    ..Default::default()
                },
                &DispatchOutputs {
                    tokens: Some(&recv8_t),
                    scales: Some(&ds_scales_t),
                    ..Default::default()
                },
                None,
                Some(config),
                s,
            )
        };
        if ds_fits {
            reached(ds_call(&ds), "dispatch ");
        } else {
            refused(
                ds_call(&ds),
                &[
                    format!("token row bytes = {ds_row} is above max_token_bytes = {budget}"),
                    format!(
                        "NCCL_EP_DISP_QUANT_DS_FP8E3M4: inputs.tokens {hidden} x float8_e4m3fn (1 B) \
                         + inputs.tokens {hidden} / 128 = {} x float32 (4 B);",
                        hidden / 128
                    ),
                ],
            );
        }
        // the same bfloat16 rows unquantized: hidden x 2 bytes
        if none_fits {
            reached(ds_call(&none), "dispatch ");
        } else {
            refused(
                ds_call(&none),
                &[format!(
                    "NCCL_EP_DISP_QUANT_NONE: inputs.tokens {hidden} x bfloat16 (2 B);"
                )],
            );
        }
        drop(handle);
        drop(group);
    }
}
