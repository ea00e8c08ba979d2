//! Every collective and a send/recv ring through the safe crate, each result copied back and
//! checked element by element against what the ranks put in.

use ncclbind::{Communicator, Group, RedOp, Stream};

use crate::checks::Checks;
use crate::element::{sum_of, value, Element};
use crate::gpu::{Fallible, Gpu};

/// Every collective, in place where the crate has it, and a ring, for `count` elements of T.
pub fn check_collectives<T: Element>(
    gpu: &Gpu,
    stream: Stream,
    comm: &Communicator,
    checks: &mut Checks,
    count: usize,
) -> Fallible<()> {
    let (n, me) = (comm.size() as usize, comm.rank() as usize);
    let tag = format!("{} x{count}", T::NAME);
    let mine = move |i| T::from_small(value(me, i));
    let sum = move |i| T::from_small(sum_of(0..n, i));
    let (first, last) = (0, n - 1);

    {
        let send = gpu.upload_with(count, mine)?;
        let mut recv = gpu.poisoned::<T>(count)?;
        comm.all_reduce(&send.slice(), &mut recv.slice_mut(), RedOp::SUM, stream)?;
        checks.elements(&format!("all_reduce {tag}"), &recv.download(stream)?, sum);
    }
    {
        let mut buffer = gpu.upload_with(count, mine)?;
        comm.all_reduce_in_place(&mut buffer.slice_mut(), RedOp::SUM, stream)?;
        let got = buffer.download(stream)?;
        checks.elements(&format!("all_reduce_in_place {tag}"), &got, sum);
    }
    {
        let send = gpu.upload_with(count, mine)?;
        let mut recv = gpu.poisoned::<T>(count)?;
        comm.broadcast(
            Some(&send.slice()),
            &mut recv.slice_mut(),
            last as i32,
            stream,
        )?;
        checks.elements(
            &format!("broadcast from {last} {tag}"),
            &recv.download(stream)?,
            |i| T::from_small(value(last, i)),
        );
    }
    {
        let mut buffer = gpu.upload_with(count, mine)?;
        comm.broadcast_in_place(&mut buffer.slice_mut(), first as i32, stream)?;
        let got = buffer.download(stream)?;
        checks.elements(
            &format!("broadcast_in_place from {first} {tag}"),
            &got,
            |i| T::from_small(value(first, i)),
        );
    }
    {
        let send = gpu.upload_with(count, mine)?;
        let mut recv = gpu.poisoned::<T>(count)?;
        comm.reduce(
            &send.slice(),
            Some(&mut recv.slice_mut()),
            RedOp::SUM,
            first as i32,
            stream,
        )?;
        let got = recv.download(stream)?;
        if me == first {
            checks.elements(&format!("reduce to {first} {tag}"), &got, sum);
        }
    }
    {
        let send = gpu.upload_with(count, mine)?;
        let mut recv = gpu.poisoned::<T>(count * n)?;
        comm.all_gather(&send.slice(), &mut recv.slice_mut(), stream)?;
        checks.elements(&format!("all_gather {tag}"), &recv.download(stream)?, |j| {
            T::from_small(value(j / count, j % count))
        });
    }
    {
        let send = gpu.upload_with(count * n, mine)?;
        let mut recv = gpu.poisoned::<T>(count)?;
        comm.reduce_scatter(&send.slice(), &mut recv.slice_mut(), RedOp::SUM, stream)?;
        checks.elements(
            &format!("reduce_scatter {tag}"),
            &recv.download(stream)?,
            |i| T::from_small(sum_of(0..n, me * count + i)),
        );
    }
    {
        // Block j of rank r goes to block r of rank j.
        let send = gpu.upload_with(count * n, mine)?;
        let mut recv = gpu.poisoned::<T>(count * n)?;
        let ran = comm.all_to_all(&send.slice(), &mut recv.slice_mut(), stream);
        if checks.present("all_to_all", ran)?.is_some() {
            checks.elements(&format!("all_to_all {tag}"), &recv.download(stream)?, |j| {
                T::from_small(value(j / count, me * count + j % count))
            });
        }
    }
    {
        let send = gpu.upload_with(count, mine)?;
        let mut recv = gpu.poisoned::<T>(count * n)?;
        let ran = comm.gather(
            &send.slice(),
            Some(&mut recv.slice_mut()),
            last as i32,
            stream,
        );
        if checks.present("gather", ran)?.is_some() {
            let got = recv.download(stream)?;
            if me == last {
                checks.elements(&format!("gather to {last} {tag}"), &got, |j| {
                    T::from_small(value(j / count, j % count))
                });
            }
        }
    }
    {
        let send = gpu.upload_with(count * n, mine)?;
        let mut recv = gpu.poisoned::<T>(count)?;
        let ran = comm.scatter(
            Some(&send.slice()),
            &mut recv.slice_mut(),
            last as i32,
            stream,
        );
        if checks.present("scatter", ran)?.is_some() {
            checks.elements(
                &format!("scatter from {last} {tag}"),
                &recv.download(stream)?,
                |i| T::from_small(value(last, me * count + i)),
            );
        }
    }
    {
        let (next, previous) = ((me + 1) % n, (me + n - 1) % n);
        let send = gpu.upload_with(count, mine)?;
        let mut recv = gpu.poisoned::<T>(count)?;
        let group = Group::start()?;
        comm.send(&send.slice(), next as i32, stream)?;
        comm.recv(&mut recv.slice_mut(), previous as i32, stream)?;
        group.end()?;
        checks.elements(
            &format!("send/recv ring {tag}"),
            &recv.download(stream)?,
            |i| T::from_small(value(previous, i)),
        );
    }
    Ok(())
}

/// One group holding an all_reduce and a send/recv ring (f32).
pub fn check_group_mix(
    gpu: &Gpu,
    stream: Stream,
    comm: &Communicator,
    checks: &mut Checks,
) -> Fallible<()> {
    let (n, me) = (comm.size() as usize, comm.rank() as usize);
    let (next, previous) = ((me + 1) % n, (me + n - 1) % n);
    let count = 4096;
    let reduce_in = gpu.upload_with(count, |i| value(me, i) as f32)?;
    let mut reduce_out = gpu.poisoned::<f32>(count)?;
    // Another pattern than the reduction's, so that a swapped buffer shows.
    let ring_in = gpu.upload_with(count, |i| value(me, i) as f32 + 10.0)?;
    let mut ring_out = gpu.poisoned::<f32>(count)?;

    let group = Group::start()?;
    comm.all_reduce(
        &reduce_in.slice(),
        &mut reduce_out.slice_mut(),
        RedOp::SUM,
        stream,
    )?;
    comm.send(&ring_in.slice(), next as i32, stream)?;
    comm.recv(&mut ring_out.slice_mut(), previous as i32, stream)?;
    group.end()?;

    let got = reduce_out.download(stream)?;
    checks.elements("group: all_reduce", &got, |i| sum_of(0..n, i) as f32);
    let got = ring_out.download(stream)?;
    checks.elements("group: send/recv ring", &got, |i| {
        value(previous, i) as f32 + 10.0
    });
    Ok(())
}

/// `sub`, made from the world communicator, holds the world ranks `members` in order (this
/// process, world rank `world_rank`, among them) and reduces over exactly them.
pub fn check_sub_communicator(
    gpu: &Gpu,
    stream: Stream,
    sub: &Communicator,
    world_rank: usize,
    members: &[usize],
    what: &str,
    checks: &mut Checks,
) -> Fallible<()> {
    let position = members.iter().position(|&r| r == world_rank);
    let (size, rank) = (sub.count()?, sub.rank());
    checks.expect(
        size == members.len() as i32 && position == Some(rank as usize),
        || {
            format!(
                "{what}: rank {rank} of {size}, expected {position:?} of {}",
                members.len()
            )
        },
    );
    let count = 1000;
    let send = gpu.upload_with(count, |i| value(world_rank, i) as f32)?;
    let mut recv = gpu.poisoned::<f32>(count)?;
    sub.all_reduce(&send.slice(), &mut recv.slice_mut(), RedOp::SUM, stream)?;
    checks.elements(
        &format!("{what}: all_reduce"),
        &recv.download(stream)?,
        |i| sum_of(members.iter().copied(), i) as f32,
    );
    Ok(())
}
