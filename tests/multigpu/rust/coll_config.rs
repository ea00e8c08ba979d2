//! The per-call config collectives (`all_reduce_config` and friends, `ncclCollConfig_t`):
//! results checked element by element like the plain calls'. Skipped, with the runtime's
//! message, when the loaded libnccl lacks the `*Config` functions.

use ncclbind::{CollConfig, Communicator, Error, RedOp, Stream};

use crate::checks::Checks;
use crate::element::{sum_of, value};
use crate::gpu::{Fallible, Gpu};

pub fn check_coll_config(
    gpu: &Gpu,
    stream: Stream,
    comm: &Communicator,
    checks: &mut Checks,
    count: usize,
) -> Fallible<()> {
    let (n, me) = (comm.size() as usize, comm.rank() as usize);
    let mut config = CollConfig::default();
    config.min_ctas = Some(1);
    config.max_ctas = Some(2);
    let mine = move |i| value(me, i) as f32;
    let sum = move |i| sum_of(0..n, i) as f32;

    let send = gpu.upload_with(count, mine)?;
    let mut recv = gpu.poisoned::<f32>(count)?;
    match comm.all_reduce_config(
        &send.slice(),
        &mut recv.slice_mut(),
        RedOp::SUM,
        stream,
        &config,
    ) {
        Err(Error::SymbolNotFound { function, message }) => {
            checks.expect(function == "ncclAllReduceConfig", || {
                format!("all_reduce_config reported {function} missing")
            });
            if me == 0 {
                println!("SKIPPED: the per-call config collectives: {message}");
            }
            return Ok(());
        }
        result => result?,
    }
    checks.elements(
        "all_reduce_config (minCTAs 1, maxCTAs 2) f32",
        &recv.download(stream)?,
        sum,
    );

    let mut buffer = gpu.upload_with(count, mine)?;
    comm.all_reduce_in_place_config(&mut buffer.slice_mut(), RedOp::SUM, stream, &config)?;
    let got = buffer.download(stream)?;
    checks.elements("all_reduce_in_place_config f32", &got, sum);

    let last = n - 1;
    let send = gpu.upload_with(count, mine)?;
    let mut recv = gpu.poisoned::<f32>(count)?;
    comm.broadcast_config(
        Some(&send.slice()),
        &mut recv.slice_mut(),
        last as i32,
        stream,
        &config,
    )?;
    checks.elements("broadcast_config f32", &recv.download(stream)?, |i| {
        value(last, i) as f32
    });

    let send = gpu.upload_with(count, mine)?;
    let mut recv = gpu.poisoned::<f32>(count * n)?;
    comm.all_gather_config(&send.slice(), &mut recv.slice_mut(), stream, &config)?;
    checks.elements("all_gather_config f32", &recv.download(stream)?, |j| {
        value(j / count, j % count) as f32
    });
    Ok(())
}
