"""Workloads for toolset performance targets, runnable on their own (`python -m bench.workloads.<name>`)."""
