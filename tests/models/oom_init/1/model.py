"""Fails in initialize with a CUDA out-of-memory message (SageMaker expects 507)."""


class TritonPythonModel:
    def initialize(self, args):
        raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")

    def execute(self, requests):
        raise RuntimeError("unreachable")
