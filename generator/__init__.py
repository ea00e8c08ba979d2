"""ncclbind's generator: NCCL headers -> typed IR -> bindings."""
VERSION = "0.1.0"
