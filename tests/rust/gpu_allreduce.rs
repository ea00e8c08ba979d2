//! GPU integration test: a one-rank communicator on device 0 runs every collective on
//! device memory through the safe crate, and each result is copied back and checked.
//! Without a GPU it prints "SKIPPED: no GPU (why)" and exits 0.
//!
//! Run: NCCL_NVLS_ENABLE=0 NCCLBIND_NCCL_PATH=/path/to/libnccl.so.2 gpu_allreduce
//! (libcudart: NCCLBIND_CUDART_PATH, else the loader's search, else $CUDA_HOME/lib64).

mod cuda_runtime;

use std::process::ExitCode;

use cuda_runtime::{gpu_unavailable, CudaRuntime, RawStream};
use ncclbind::sys::nccl::ncclRedOp_t;
use ncclbind::{
    library_info, CommConfig, Communicator, DeviceSlice, DeviceSliceMut, Error, Group, Library,
    RedOp, Stream, UniqueId,
};

const LEN: usize = 1 << 20;

fn main() -> ExitCode {
    let cuda = CudaRuntime::load();
    if let Some(why) = gpu_unavailable(&cuda) {
        println!("SKIPPED: no GPU ({why})");
        return ExitCode::SUCCESS;
    }
    match run(&cuda.unwrap()) {
        Ok((passed, 0)) => {
            println!("PASS gpu_allreduce: {passed} checks");
            ExitCode::SUCCESS
        }
        Ok((passed, failed)) => {
            println!(
                "FAIL gpu_allreduce: {failed} of {} checks failed",
                passed + failed
            );
            ExitCode::FAILURE
        }
        Err(why) => {
            println!("FAIL gpu_allreduce: {why}");
            ExitCode::FAILURE
        }
    }
}

/// The device buffers and stream every check uses, and the host copy of the input.
struct Setup<'c> {
    cuda: &'c CudaRuntime,
    raw_stream: RawStream,
    stream: Stream,
    send_ptr: *mut f32,
    recv_ptr: *mut f32,
    input: Vec<f32>,
}

impl Setup<'_> {
    fn send(&self) -> DeviceSlice<'static, f32> {
        unsafe { DeviceSlice::from_raw_parts(self.send_ptr, LEN).unwrap() }
    }

    /// The receive buffer, zeroed first so that a result is really written.
    fn recv(&self) -> Result<DeviceSliceMut<'static, f32>, String> {
        self.cuda
            .copy_to_device(self.recv_ptr, &vec![0.0f32; LEN])?;
        Ok(unsafe { DeviceSliceMut::from_raw_parts(self.recv_ptr, LEN).unwrap() })
    }

    /// Waits for the stream and compares the receive buffer with `expected`.
    fn expect(&self, expected: impl Fn(f32) -> f32) -> Result<(), String> {
        self.cuda.synchronize(self.raw_stream)?;
        let mut host = vec![0.0f32; LEN];
        self.cuda.copy_to_host(&mut host, self.recv_ptr)?;
        match (0..LEN).find(|&i| host[i] != expected(self.input[i])) {
            None => Ok(()),
            Some(i) => Err(format!(
                "element {i} is {}, expected {}",
                host[i],
                expected(self.input[i])
            )),
        }
    }
}

type Outcome = Result<(), Box<dyn std::error::Error>>;

fn run(cuda: &CudaRuntime) -> Result<(usize, usize), Box<dyn std::error::Error>> {
    let info = library_info(Library::Nccl)?;
    println!(
        "libnccl {} ({:?}) from {}; CUDA runtime {}",
        info.version,
        info.cuda,
        info.path.display(),
        cuda.path
    );
    let comm = Communicator::init_rank(1, &UniqueId::new()?, 0)?;

    let raw_stream = cuda.create_stream()?;
    let setup = Setup {
        cuda,
        raw_stream,
        stream: unsafe { Stream::from_raw(raw_stream) }?,
        send_ptr: cuda.alloc(LEN)?,
        recv_ptr: cuda.alloc(LEN)?,
        input: (0..LEN).map(|i| (i % 1000) as f32 * 0.5).collect(),
    };
    cuda.copy_to_device(setup.send_ptr, &setup.input)?;
    let (s, stream) = (&setup, setup.stream);
    let mut checks = Checks::default();

    checks.run("count, rank, device", || {
        let facts = (comm.count(), comm.rank(), comm.cuda_device());
        if facts == (Ok(1), 0, Ok(0)) {
            Ok(())
        } else {
            Err(format!("{facts:?}").into())
        }
    });
    checks.run("all_reduce sum", || {
        comm.all_reduce(&s.send(), &mut s.recv()?, RedOp::SUM, stream)?;
        Ok(s.expect(|x| x)?)
    });
    checks.run("all_reduce PreMulSum x3", || {
        let times_three = comm.pre_mul_sum(3.0f32)?;
        comm.all_reduce(&s.send(), &mut s.recv()?, times_three.op(), stream)?;
        Ok(s.expect(|x| 3.0 * x)?)
    });
    checks.run("all_reduce_in_place avg", || {
        let mut buffer = s.recv()?;
        comm.all_reduce(&s.send(), &mut buffer, RedOp::SUM, stream)?;
        comm.all_reduce_in_place(&mut buffer, RedOp::AVG, stream)?;
        Ok(s.expect(|x| x)?)
    });
    checks.run("reduce max", || {
        comm.reduce(&s.send(), Some(&mut s.recv()?), RedOp::MAX, 0, stream)?;
        Ok(s.expect(|x| x)?)
    });
    checks.run("broadcast", || {
        comm.broadcast(Some(&s.send()), &mut s.recv()?, 0, stream)?;
        Ok(s.expect(|x| x)?)
    });
    checks.run("all_gather", || {
        comm.all_gather(&s.send(), &mut s.recv()?, stream)?;
        Ok(s.expect(|x| x)?)
    });
    checks.run("reduce_scatter", || {
        comm.reduce_scatter(&s.send(), &mut s.recv()?, RedOp::SUM, stream)?;
        Ok(s.expect(|x| x)?)
    });
    checks.run("all_to_all", || {
        comm.all_to_all(&s.send(), &mut s.recv()?, stream)?;
        Ok(s.expect(|x| x)?)
    });
    checks.run("gather", || {
        comm.gather(&s.send(), Some(&mut s.recv()?), 0, stream)?;
        Ok(s.expect(|x| x)?)
    });
    checks.run("scatter", || {
        comm.scatter(Some(&s.send()), &mut s.recv()?, 0, stream)?;
        Ok(s.expect(|x| x)?)
    });
    checks.run("send/recv to self in a group", || {
        let mut recv = s.recv()?;
        let group = Group::start()?;
        comm.send(&s.send(), 0, stream)?;
        comm.recv(&mut recv, 0, stream)?;
        group.end()?;
        Ok(s.expect(|x| x)?)
    });
    checks.run("registered buffer", || {
        let registered = comm.register(s.send())?;
        comm.all_reduce(&s.send(), &mut s.recv()?, RedOp::SUM, stream)?;
        s.expect(|x| x)?;
        drop(registered);
        Ok(())
    });
    checks.run("an op made for f64 is refused for f32 data", || {
        let op = comm.pre_mul_sum(2.0f64)?;
        match comm.all_reduce(&s.send(), &mut s.recv()?, op.op(), stream) {
            Err(Error::RedOpTypeMismatch { .. }) => Ok(()),
            other => Err(format!("{other:?}").into()),
        }
    });
    checks.run("an op of another communicator is refused", || {
        let other = Communicator::init_rank(1, &UniqueId::new()?, 0)?;
        let op = other.pre_mul_sum(2.0f32)?;
        let result = comm.all_reduce(&s.send(), &mut s.recv()?, op.op(), stream);
        drop(op);
        other.destroy()?;
        match result {
            Err(Error::RedOpFromOtherCommunicator) => Ok(()),
            other => Err(format!("{other:?}").into()),
        }
    });
    checks.run("split", || {
        let child = comm
            .split(Some(0), 0)?
            .ok_or("color 0 gave no communicator")?;
        if child.size() != 1 {
            return Err(format!("the child has {} ranks", child.size()).into());
        }
        child.destroy()?;
        Ok(comm.async_error()?)
    });

    checks.run("init_rank_config in the loaded library's layout", || {
        // A non-blocking config: NCCL must read `blocking` from our struct to return
        // ncclInProgress, which init_rank_config then waits out.
        let mut config = CommConfig::default();
        config.blocking = Some(false);
        config.max_ctas = Some(16);
        config.comm_name = Some(std::ffi::CString::new("ncclbind-config")?);
        let configured = Communicator::init_rank_config(1, &UniqueId::new()?, 0, &config)?;
        configured.all_reduce(&s.send(), &mut s.recv()?, RedOp::SUM, stream)?;
        let checked = s.expect(|x| x); // one rank: the sum is the input
        configured.destroy()?;
        Ok(checked?)
    });

    // Last: NCCL's own argument error may leave the communicator unusable.
    checks.run(
        "NCCL rejects an unknown op with its own error",
        || match comm.all_reduce(
            &s.send(),
            &mut s.recv()?,
            RedOp::from_raw(ncclRedOp_t(1000)),
            stream,
        ) {
            Err(Error::Nccl { code: 1..=8, .. }) => Ok(()),
            other => Err(format!("{other:?}").into()),
        },
    );
    checks.run("finalize", || Ok(comm.finalize()?));
    cuda.free(setup.send_ptr)?;
    cuda.free(setup.recv_ptr)?;
    cuda.destroy_stream(raw_stream)?;
    Ok((checks.passed, checks.failed))
}

#[derive(Default)]
struct Checks {
    passed: usize,
    failed: usize,
}

impl Checks {
    fn run(&mut self, name: &str, body: impl FnOnce() -> Outcome) {
        match body() {
            Ok(()) => {
                println!("ok   {name}");
                self.passed += 1;
            }
            Err(why) => {
                println!("FAIL {name}: {why}");
                self.failed += 1;
            }
        }
    }
}
