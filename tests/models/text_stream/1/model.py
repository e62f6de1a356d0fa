"""Decoupled: COUNT responses with TEXT = "<PROMPT> <i>"; COUNT -1 fails after one token, and
COUNT -2 fails on its first response."""
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            prompt = pb_utils.get_input_tensor_by_name(request, "PROMPT").as_numpy()[0][0].decode("utf-8")
            count = int(pb_utils.get_input_tensor_by_name(request, "COUNT").as_numpy()[0][0])
            if count == -2:
                error = pb_utils.TritonError("text_stream: failed at the first response")
                sender.send(pb_utils.InferenceResponse(error=error), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                continue
            if count < 0:
                text = np.array([[f"{prompt} 0".encode("utf-8")]], dtype=object)
                sender.send(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("TEXT", text)]))
                error = pb_utils.TritonError("text_stream: failed mid-stream")
                sender.send(pb_utils.InferenceResponse(error=error), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                continue
            for i in range(count):
                if sender.is_cancelled():
                    break
                text = np.array([[f"{prompt} {i}".encode("utf-8")]], dtype=object)
                sender.send(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("TEXT", text)]))
            sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
