"""The reference of NCCL EP's dispatch and combine, in NumPy, for ep_ranks.py (on the GPUs) and
tests/python/test_ep_fake.py (on the CPU stand-in): inputs every rank can rebuild from a seed,
what each layout must receive, the expert step a caller does between dispatch and combine, and
what combine must return.

Tokens carry their identity: column 0 is the source rank + 1, columns 1 and 2 the token index
(t // 16, t % 16), every other column a small integer of (rank, token, column); all are exact in
bfloat16 and in float8 e4m3 (integers up to 16), so a received row says where it came from and
can be compared exactly. A zero row (padding) has identity 0. NCCL EP does not promise the order
of rows within an expert's (or a source rank's) block, so received rows are compared as sets."""
from __future__ import annotations

import numpy as np

IDENTITY_COLUMNS = 3


def routing(rank: int, num_tokens: int, top_k: int, num_experts: int, seed: int = 0) -> np.ndarray:
    """int64 [num_tokens, top_k]: distinct experts per token, reproducible from (seed, rank)."""
    rng = np.random.default_rng(seed * 1000 + rank)
    return np.stack([rng.permutation(num_experts)[:top_k] for _ in range(num_tokens)]).astype(np.int64) \
        if num_tokens else np.zeros((0, top_k), np.int64)


def tokens(rank: int, num_tokens: int, hidden: int) -> np.ndarray:
    """float32 [num_tokens, hidden] with each row's identity (see the module's docstring)."""
    t = np.arange(num_tokens)[:, None]
    j = np.arange(hidden)[None, :]
    out = ((rank * 7 + t * 3 + j) % 17 - 8).astype(np.float32)
    out[:, 0] = rank + 1
    out[:, 1] = (t // 16)[:, 0]
    out[:, 2] = (t % 16)[:, 0]
    return out


def weights(rank: int, num_tokens: int, top_k: int) -> np.ndarray:
    """float32 [num_tokens, top_k]: eighths (exact in every float type)."""
    t = np.arange(num_tokens)[:, None]
    k = np.arange(top_k)[None, :]
    return (((rank + t + k) % 8 + 1) / 8).astype(np.float32)


def identity(row: np.ndarray) -> tuple[int, int] | None:
    """(source rank, token) of a received row; None for a zero (padding) row."""
    source = int(round(float(row[0]))) - 1
    if source < 0:
        return None
    return source, int(round(float(row[1]))) * 16 + int(round(float(row[2])))


def local_range(rank: int, num_experts: int, nranks: int) -> range:
    local = num_experts // nranks
    return range(rank * local, (rank + 1) * local)


def check_rows(rows: np.ndarray, expected: list[tuple[int, int]], all_tokens: list[np.ndarray], what: str) -> list[str]:
    """rows (received) hold exactly the tokens `expected` ((source rank, token) pairs, a multiset),
    each equal to its source row. Returns the failures, as sentences."""
    errors = []
    got = []
    for i, row in enumerate(rows):
        who = identity(row)
        if who is None:
            errors.append(f"{what}: row {i} is padding where a token was expected")
            continue
        source, token = who
        if not (0 <= source < len(all_tokens) and 0 <= token < len(all_tokens[source])):
            errors.append(f"{what}: row {i} names rank {source} token {token}, which does not exist")
            continue
        if not np.array_equal(row.astype(np.float32), all_tokens[source][token]):
            errors.append(f"{what}: row {i} (rank {source} token {token}) differs from the token sent")
        got.append(who)
    if sorted(got) != sorted(expected):
        missing = sorted(set(expected) - set(got))[:5]
        extra = sorted(set(got) - set(expected))[:5]
        errors.append(f"{what}: received {len(got)} tokens, expected {len(expected)} (missing e.g. {missing}, "
                      f"unexpected e.g. {extra})")
    return errors


def expected_by_expert(all_routing: list[np.ndarray], rank: int, num_experts: int, nranks: int) -> dict:
    """local expert -> [(source rank, token)] routed to it."""
    out = {}
    for local, expert in enumerate(local_range(rank, num_experts, nranks)):
        out[local] = [(s, int(t)) for s, r in enumerate(all_routing) for t in np.nonzero((r == expert).any(1))[0]]
    return out


def expected_by_source(all_routing: list[np.ndarray], rank: int, num_experts: int, nranks: int) -> dict:
    """source rank -> [(source rank, token)] with at least one expert on this rank (each once)."""
    mine = local_range(rank, num_experts, nranks)
    return {s: [(s, int(t)) for t in np.nonzero(((r >= mine.start) & (r < mine.stop)).any(1))[0]]
            for s, r in enumerate(all_routing)}


def check_ll_expert_major(recv: np.ndarray, counts: np.ndarray, all_routing, all_tokens, rank, num_experts,
                          nranks) -> list[str]:
    """LL expert-major: recv [local experts, nranks * max tokens, hidden], counts [local experts]."""
    errors = []
    for local, expected in expected_by_expert(all_routing, rank, num_experts, nranks).items():
        n = int(counts[local])
        if n != len(expected):
            errors.append(f"expert {local}: counter {n}, expected {len(expected)}")
        errors += check_rows(recv[local, :n], expected, all_tokens, f"expert {local}")
    return errors


def check_ll_rank_major(recv, recv_idx, recv_weights, counts, all_routing, all_tokens, all_weights, rank,
                        num_experts, nranks) -> list[str]:
    """LL rank-major: recv [nranks, max tokens, hidden]; recv_idx / recv_weights [nranks, max, top_k]
    (local expert ids or -1, and their weights); counts [nranks] (None: not asked)."""
    errors = []
    mine = local_range(rank, num_experts, nranks)
    for source, expected in expected_by_source(all_routing, rank, num_experts, nranks).items():
        n = len(expected) if counts is None else int(counts[source])
        if n != len(expected):
            errors.append(f"from rank {source}: counter {n}, expected {len(expected)}")
        rows = recv[source, :n]
        errors += check_rows(rows, expected, all_tokens, f"from rank {source}")
        for i, row in enumerate(rows):
            who = identity(row)
            if who is None or who[0] != source:
                continue
            route = all_routing[source][who[1]]
            want = np.where((route >= mine.start) & (route < mine.stop), route - mine.start, -1)
            if sorted(recv_idx[source, i].tolist()) != sorted(want.tolist()):
                errors.append(f"from rank {source} token {who[1]}: expert ids {recv_idx[source, i].tolist()}, "
                              f"expected {want.tolist()} (as a set)")
            for k, local in enumerate(recv_idx[source, i].tolist()):
                if local >= 0:
                    kk = int(np.nonzero(route == local + mine.start)[0][0])
                    if abs(float(recv_weights[source, i, k]) - float(all_weights[source][who[1], kk])) > 1e-6:
                        errors.append(f"from rank {source} token {who[1]}: weight of expert {local} differs")
    return errors


def check_ht_flat(recv, recv_idx, recv_weights, total, all_routing, all_tokens, all_weights, rank, num_experts,
                  nranks) -> list[str]:
    """HT flat: recv [slots, hidden] with `total` valid rows, recv_idx / recv_weights [slots, top_k]."""
    expected = [pair for pairs in expected_by_source(all_routing, rank, num_experts, nranks).values() for pair in pairs]
    errors = []
    if total != len(expected):
        errors.append(f"received {total} tokens, expected {len(expected)}")
    errors += check_rows(recv[:total], expected, all_tokens, "flat")
    mine = local_range(rank, num_experts, nranks)
    for i in range(total):
        who = identity(recv[i])
        if who is None:
            continue
        route = all_routing[who[0]][who[1]]
        # (local id, weight) pairs of the sender's top-k that route here, and -1 padding for the
        # rest; the library's order within the row is its own (0.2.0: ascending ids, then -1).
        sent = all_weights[who[0]][who[1]]
        here = (route >= mine.start) & (route < mine.stop)
        want = sorted((int(e - mine.start), round(float(w), 6)) for e, w in zip(route[here], sent[here]))
        got_ids = recv_idx[i].tolist()
        got = sorted((int(e), round(float(w), 6)) for e, w in zip(got_ids, recv_weights[i].tolist()) if e >= 0)
        if got != want or got_ids.count(-1) != len(route) - len(want):
            errors.append(f"slot {i} (rank {who[0]} token {who[1]}): (expert id, weight) {list(zip(got_ids, recv_weights[i].tolist()))}, "
                          f"expected {want} and {len(route) - len(want)} ids of -1")
    return errors


def check_ht_expert_major(recv, all_routing, all_tokens, rank, num_experts, nranks) -> list[str]:
    """HT expert-major: recv [slots, hidden], one row per (token, local expert), zero rows pad."""
    expected = [pair for pairs in expected_by_expert(all_routing, rank, num_experts, nranks).values()
                for pair in pairs]
    rows = [row for row in recv if identity(row) is not None]
    return check_rows(np.array(rows).reshape(-1, recv.shape[1]), expected, all_tokens, "expert-major")


def expert_step(mode: str, recv: np.ndarray, recv_idx=None, recv_weights=None) -> np.ndarray:
    """What the caller hands combine: LL expert-major the rows as they are (combine weighs them);
    LL rank-major and HT flat each row times the sum of its routed weights (pre-reduced over this
    rank's experts); HT expert-major each slot times its weight."""
    if mode == "ll_expert_major":
        return recv.astype(np.float32)
    if mode in ("ll_rank_major", "ht_flat"):
        scale = np.where(recv_idx >= 0, recv_weights, 0).sum(-1, keepdims=True)
        return (recv * scale).astype(np.float32)
    if mode == "ht_expert_major":
        return (recv * recv_weights.reshape(-1, 1)).astype(np.float32)
    raise ValueError(mode)


def expected_combine(route: np.ndarray, token_rows: np.ndarray, token_weights: np.ndarray) -> np.ndarray:
    """Each token times the sum of its routed weights (what combine returns after expert_step)."""
    return token_rows * np.where(route >= 0, token_weights, 0).sum(-1, keepdims=True)


def check_combine(out: np.ndarray, expected: np.ndarray, dtype_name: str) -> list[str]:
    tolerance = {"float32": 1e-5, "bfloat16": 2e-2, "float16": 2e-3}.get(dtype_name, 1e-1)
    scale = np.maximum(np.abs(expected), 1.0)
    bad = np.abs(out.astype(np.float64) - expected) > tolerance * scale
    if bad.any():
        t, j = np.argwhere(bad)[0]
        return [f"combine: {int(bad.sum())} values off, first token {t} column {j}: {out[t, j]} vs {expected[t, j]}"]
    return []
