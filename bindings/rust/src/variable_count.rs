//! Variable-count collectives, which NCCL does not have, built from calls it has in one group
//! (ncclGroupStart ... ncclGroupEnd), as the Python layer builds them
//! (bindings/python/ncclbind/core/variable_count.py), with the same checks:
//!
//! * [`all_to_allv`](Communicator::all_to_allv): one ncclSend and one ncclRecv per peer
//! * [`all_gatherv`](Communicator::all_gatherv): one ncclSend (this rank's block) and one
//!   ncclRecv per peer
//! * [`reduce_scatterv`](Communicator::reduce_scatterv): one ncclReduce per rank, rooted at the
//!   rank whose block it is
//!
//! Counts and displacements are in values of T (complex numbers for a complex T). Every one is
//! checked before NCCL is called: one per rank, each block inside its buffer, no two receive
//! blocks overlapping. Empty blocks make no NCCL call (the peer's matching block is empty
//! too). Every rank must pass counts that agree with its peers' (`send_counts[p]` on rank r
//! equals `recv_counts[r]` on rank p): NCCL cannot check that, and a mismatch hangs or
//! corrupts, which is what an [`AbortHandle`](crate::AbortHandle) is for.

use crate::communicator::Communicator;
use crate::data_type::DataType;
use crate::device_slice::{DeviceSlice, DeviceSliceMut};
use crate::error::{Error, Result};
use crate::group::Group;
use crate::reduction::RedOp;
use crate::stream::Stream;

impl Communicator {
    /// Block p of `send` (`send_counts[p]` values at `send_displs[p]`) goes to rank p; block q
    /// of `recv` (`recv_counts[q]` values at `recv_displs[q]`) comes from rank q. One ncclSend
    /// and one ncclRecv per non-empty block, in one group.
    #[allow(clippy::too_many_arguments)] // the order of Python's all_to_allv and MPI_Alltoallv
    pub fn all_to_allv<T: DataType>(
        &self,
        send: &DeviceSlice<'_, T>,
        send_counts: &[usize],
        send_displs: &[usize],
        recv: &mut DeviceSliceMut<'_, T>,
        recv_counts: &[usize],
        recv_displs: &[usize],
        stream: Stream,
    ) -> Result<()> {
        let _inside = self.enter()?; // counted across the group below
        let nranks = self.size();
        one_per_rank("send_counts", send_counts, nranks)?;
        one_per_rank("send_displs", send_displs, nranks)?;
        one_per_rank("recv_counts", recv_counts, nranks)?;
        one_per_rank("recv_displs", recv_displs, nranks)?;
        let send_blocks = Blocks::new("send_counts", send_counts, "send_displs", send_displs);
        let recv_blocks = Blocks::new("recv_counts", recv_counts, "recv_displs", recv_displs);
        send_blocks.inside("send", send.len())?;
        recv_blocks.inside("recv", recv.len())?;
        recv_blocks.not_overlapping()?;

        let group = Group::start()?;
        for (peer, p) in (0..nranks).zip(0..) {
            if send_counts[p] > 0 {
                let block = send.block(send_displs[p], send_counts[p]);
                self.send(&block, peer, stream)?;
            }
            if recv_counts[p] > 0 {
                let mut block = recv.block_mut(recv_displs[p], recv_counts[p]);
                self.recv(&mut block, peer, stream)?;
            }
        }
        group.end()
    }

    /// Block q of `recv` (`recv_counts[q]` values at `recv_displs[q]`; packed in rank order
    /// when `recv_displs` is None) is rank q's `send`, which holds `recv_counts[q]` values.
    /// This rank's `send` goes to every rank (its own block too) with one ncclSend per peer,
    /// and each block comes with one ncclRecv, in one group.
    pub fn all_gatherv<T: DataType>(
        &self,
        send: &DeviceSlice<'_, T>,
        recv: &mut DeviceSliceMut<'_, T>,
        recv_counts: &[usize],
        recv_displs: Option<&[usize]>,
        stream: Stream,
    ) -> Result<()> {
        let _inside = self.enter()?; // counted across the group below
        let (nranks, me) = (self.size(), self.rank());
        one_per_rank("recv_counts", recv_counts, nranks)?;
        let packed;
        let recv_displs = match recv_displs {
            Some(displs) => {
                one_per_rank("recv_displs", displs, nranks)?;
                displs
            }
            None => {
                packed = packed_displs(recv_counts);
                &packed[..]
            }
        };
        let own = recv_counts[me as usize];
        if send.len() != own {
            return Err(Error::OwnBlockLength {
                argument: "send",
                len: send.len(),
                counts_argument: "recv_counts",
                rank: me,
                count: own,
            });
        }
        let recv_blocks = Blocks::new("recv_counts", recv_counts, "recv_displs", recv_displs);
        recv_blocks.inside("recv", recv.len())?;
        recv_blocks.not_overlapping()?;

        let group = Group::start()?;
        for (peer, p) in (0..nranks).zip(0..) {
            if !send.is_empty() {
                self.send(send, peer, stream)?;
            }
            if recv_counts[p] > 0 {
                let mut block = recv.block_mut(recv_displs[p], recv_counts[p]);
                self.recv(&mut block, peer, stream)?;
            }
        }
        group.end()
    }

    /// `recv` on rank p = `op` over all ranks of block p of `send` (`recv_counts[p]` values at
    /// `send_displs[p]`; packed in rank order when `send_displs` is None); `recv` holds at
    /// least `recv_counts[this rank]` values, and the first that many are written.
    ///
    /// NCCL has no reduce-scatter with counts per rank: this is one ncclReduce per non-empty
    /// block, rooted at the rank the block belongs to, all in one group. NCCL runs the
    /// reductions together, but each moves its block as a reduce does (a tree or ring to one
    /// root), so it is slower than [`reduce_scatter`](Self::reduce_scatter) for equal counts;
    /// use that when counts are equal.
    pub fn reduce_scatterv<T: DataType>(
        &self,
        send: &DeviceSlice<'_, T>,
        recv: &mut DeviceSliceMut<'_, T>,
        recv_counts: &[usize],
        send_displs: Option<&[usize]>,
        op: RedOp<'_>,
        stream: Stream,
    ) -> Result<()> {
        let _inside = self.enter()?; // counted across the group below
        let (nranks, me) = (self.size(), self.rank());
        one_per_rank("recv_counts", recv_counts, nranks)?;
        let packed;
        let send_displs = match send_displs {
            Some(displs) => {
                one_per_rank("send_displs", displs, nranks)?;
                displs
            }
            None => {
                packed = packed_displs(recv_counts);
                &packed[..]
            }
        };
        Blocks::new("recv_counts", recv_counts, "send_displs", send_displs)
            .inside("send", send.len())?;
        let own = recv_counts[me as usize];
        if own > recv.len() {
            return Err(Error::OwnBlockLength {
                argument: "recv",
                len: recv.len(),
                counts_argument: "recv_counts",
                rank: me,
                count: own,
            });
        }
        op.check_usable::<T>(self)?;

        let group = Group::start()?;
        for (root, r) in (0..nranks).zip(0..) {
            if recv_counts[r] > 0 {
                let block = send.block(send_displs[r], recv_counts[r]);
                if root == me {
                    let mut own_block = recv.block_mut(0, own);
                    self.reduce(&block, Some(&mut own_block), op, root, stream)?;
                } else {
                    self.reduce(&block, None, op, root, stream)?;
                }
            }
        }
        group.end()
    }
}

/// `values` holds one entry per rank.
fn one_per_rank(argument: &'static str, values: &[usize], nranks: i32) -> Result<()> {
    if values.len() == nranks as usize {
        Ok(())
    } else {
        Err(Error::CountsLength {
            argument,
            len: values.len(),
            nranks,
        })
    }
}

/// Displacements of blocks laid end to end in rank order (one that overflows is past the end
/// of any buffer, which the block check then reports).
fn packed_displs(counts: &[usize]) -> Vec<usize> {
    let mut offset = 0usize;
    counts
        .iter()
        .map(|&count| {
            let displ = offset;
            offset = offset.saturating_add(count);
            displ
        })
        .collect()
}

/// The blocks of one buffer: `counts[i]` values at `displs[i]` (both one per rank, checked).
struct Blocks<'a> {
    counts_argument: &'static str,
    counts: &'a [usize],
    displs_argument: &'static str,
    displs: &'a [usize],
}

impl<'a> Blocks<'a> {
    fn new(
        counts_argument: &'static str,
        counts: &'a [usize],
        displs_argument: &'static str,
        displs: &'a [usize],
    ) -> Blocks<'a> {
        Blocks {
            counts_argument,
            counts,
            displs_argument,
            displs,
        }
    }

    /// The non-empty blocks as (start, end, index).
    fn non_empty(&self) -> impl Iterator<Item = (usize, Option<usize>, usize)> + '_ {
        self.counts
            .iter()
            .zip(self.displs)
            .enumerate()
            .filter(|(_, (&count, _))| count > 0)
            .map(|(index, (&count, &displ))| (displ, displ.checked_add(count), index))
    }

    /// Every non-empty block lies inside `buffer`, which holds `len` values.
    fn inside(&self, buffer: &'static str, len: usize) -> Result<()> {
        match self
            .non_empty()
            .find(|&(_, end, _)| end.is_none_or(|end| end > len))
        {
            None => Ok(()),
            Some((displ, _, index)) => Err(Error::BlockPastEnd {
                argument: self.displs_argument,
                counts_argument: self.counts_argument,
                index,
                displ,
                count: self.counts[index],
                buffer,
                buffer_len: len,
            }),
        }
    }

    /// No two non-empty blocks share an element (they are written at the same time). Call it
    /// after [`inside`](Self::inside), which rules out ends that overflow.
    fn not_overlapping(&self) -> Result<()> {
        let mut blocks: Vec<(usize, usize, usize)> = self
            .non_empty()
            .map(|(start, end, index)| (start, end.unwrap_or(usize::MAX), index))
            .collect();
        blocks.sort_unstable();
        for pair in blocks.windows(2) {
            let [(start, end, index), (next_start, next_end, next_index)] = [pair[0], pair[1]];
            if next_start < end {
                return Err(Error::BlocksOverlap {
                    argument: self.displs_argument,
                    index: index.max(next_index),
                    other: index.min(next_index),
                    blocks: [(start, end), (next_start, next_end)],
                });
            }
        }
        Ok(())
    }
}
