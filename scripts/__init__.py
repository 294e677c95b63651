"""Developer scripts: the oracle file list and readelf comparison (oracle_files), the perf workloads
(record_workloads), the real-binary corpus (corpus), the system sweep (sweep) and the demo's address
picker (demo_address). A package, so the tests import them by name (`from scripts import
oracle_files`); the ones that import a sibling run as `python3 -m scripts.NAME` from the repository
root, as the Makefile runs them all."""
