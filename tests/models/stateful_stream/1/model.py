"""Streams N responses of OUT = [TAG, i] from a thread, DELAY_MS apart; execute returns at once.
Logs each request it gets to the file the "log" parameter names, and "<time> done <TAG>" as
each stream's last response is sent."""
import json
import threading
import time

import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def initialize(self, args):
        parameters = json.loads(args["model_config"]).get("parameters", {})
        self.log = parameters.get("log", {}).get("string_value", "")
        self.delay = int(parameters.get("delay_ms", {}).get("string_value", "100")) / 1000
        self.lock = threading.Lock()

    def execute(self, requests):
        for request in requests:
            tag = int(pb_utils.get_input_tensor_by_name(request, "TAG").as_numpy()[0])
            n = int(pb_utils.get_input_tensor_by_name(request, "N").as_numpy()[0])
            if self.log:
                with self.lock, open(self.log, "a") as log:
                    log.write(f"{time.time():.3f} {request.correlation_id()} {request.flags()} {tag} {n}\n")
            sender = request.get_response_sender()
            threading.Thread(target=self.stream, args=(sender, tag, n), daemon=True).start()
        return None

    def stream(self, sender, tag, n):
        for i in range(n):
            time.sleep(self.delay)
            if sender.is_cancelled():
                break
            out = np.array([tag, i], dtype=np.int32)
            sender.send(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("OUT", out)]))
        if self.log:
            with self.lock, open(self.log, "a") as log:
                log.write(f"{time.time():.3f} done {tag}\n")
        sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
