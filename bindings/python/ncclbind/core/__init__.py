"""The hand-written Pythonic layer over the generated ncclbind._nccl."""
