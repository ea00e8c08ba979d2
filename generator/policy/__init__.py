"""The binding policy's loaders: each module reads one file of policy/ (nccl.py: nccl.toml,
conventions.py: conventions.toml, ...) and checks it against the IR; common.py holds what they share."""
