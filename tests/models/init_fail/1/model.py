"""Fails in initialize, so loading it fails with this message."""


class TritonPythonModel:
    def initialize(self, args):
        raise RuntimeError("init_fail: this model refuses to initialise")

    def execute(self, requests):
        raise RuntimeError("unreachable")
