"""A toy chat model: the words of the prompt's last `user: ` line, echoed one per response."""
import numpy as np
import triton_python_backend_utils as pb_utils


def text(value):
    return pb_utils.Tensor("TEXT", np.array([[value.encode("utf-8")]], dtype=object))


class TritonPythonModel:
    def execute(self, requests):
        for request in requests:
            sender = request.get_response_sender()
            prompt = pb_utils.get_input_tensor_by_name(request, "PROMPT").as_numpy()[0][0].decode("utf-8")
            limit = int(pb_utils.get_input_tensor_by_name(request, "MAX_TOKENS").as_numpy()[0][0])
            users = [line[len("user: "):] for line in prompt.split("\n") if line.startswith("user: ")]
            words = ["Echo:"] + (users[-1].split() if users else [])
            failed = False
            for i, word in enumerate(words[:limit]):
                if sender.is_cancelled():
                    break
                last = i == min(limit, len(words)) - 1
                sender.send(pb_utils.InferenceResponse(output_tensors=[text(word if last else word + " ")]))
                if "FAIL" in words:
                    error = pb_utils.TritonError("chat_stream: failed mid-answer")
                    sender.send(pb_utils.InferenceResponse(error=error), flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                    failed = True
                    break
            if not failed:
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        return None
