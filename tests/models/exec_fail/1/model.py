"""Raises in execute; the python backend's error carries a traceback naming this file."""


class TritonPythonModel:
    def execute(self, requests):
        raise RuntimeError("exec_fail: this model always fails")
