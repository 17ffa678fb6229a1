"""The core: the plan, the runner, the verifier, the report and the Python API."""
