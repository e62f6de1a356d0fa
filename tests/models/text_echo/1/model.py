"""TEXT = PROMPT.upper()."""
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            prompt = pb_utils.get_input_tensor_by_name(request, "PROMPT").as_numpy()
            text = np.array([[p.decode("utf-8").upper().encode("utf-8") for p in row] for row in prompt], dtype=object)
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("TEXT", text)]))
        return responses
