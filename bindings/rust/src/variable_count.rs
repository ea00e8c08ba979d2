//! Variable-count collectives, which NCCL does not have, built from calls it has in one group
//! (ncclGroupStart ... ncclGroupEnd). Each is described once in
//! policy/variable_count.toml and its method rendered into
//! generated/variable_count_methods.rs (Python's from the same entry), over the checks here:
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

include!("generated/variable_count_methods.rs");

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

/// How this rank's own block must fit the buffer that holds it.
enum OwnBlock {
    /// The buffer is the block (all_gatherv's send).
    Equal,
    /// The buffer holds at least the block (reduce_scatterv's recv).
    AtLeast,
}

/// This rank's block (`counts[me]`) against `argument`, which holds `len` values.
fn own_block(
    argument: &'static str,
    len: usize,
    counts_argument: &'static str,
    counts: &[usize],
    me: i32,
    rule: OwnBlock,
) -> Result<()> {
    let count = counts[me as usize];
    let fits = match rule {
        OwnBlock::Equal => len == count,
        OwnBlock::AtLeast => count <= len,
    };
    if fits {
        Ok(())
    } else {
        Err(Error::OwnBlockLength {
            argument,
            len,
            counts_argument,
            rank: me,
            count,
        })
    }
}
