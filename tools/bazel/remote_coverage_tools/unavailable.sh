#!/bin/sh
echo "ncclbind: coverage tools are not available offline (tools/bazel/remote_coverage_tools is a stub)" >&2
exit 1
