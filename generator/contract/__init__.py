"""The API contract between NCCL versions: each header set's API surface, the
atomic change events between two surfaces, the append-only log of those events
per library (bindings/contract/), and the ABI compatibility verdict on them."""
