"""A LitServe app written as LitServe's docs show: an untyped `decode_request` reading
`request["input"]`, a batched `predict` of 20 ms + 2 ms per row. Runs in its own virtualenv
(tests/gradio_versions/envs.py); `python litserve_app.py [PORT]` (8000, as LitServe's docs show, by default),
MAX_BATCH_SIZE from the environment."""

import os
import sys
import time

import litserve as ls


class BatchedAPI(ls.LitAPI):
    def setup(self, device):
        self.base_s, self.per_row_s = 0.02, 0.002

    def decode_request(self, request):
        return request["input"]

    def predict(self, x):
        rows = x if isinstance(x, list) else [x]
        time.sleep(self.base_s + self.per_row_s * len(rows))
        lengths = [len(str(row)) for row in rows]
        return lengths if isinstance(x, list) else lengths[0]

    def encode_response(self, output):
        return {"output": output}


if __name__ == "__main__":
    api = BatchedAPI(max_batch_size=int(os.environ.get("MAX_BATCH_SIZE", "4")), batch_timeout=0.01)
    server = ls.LitServer(api, accelerator="cpu")
    server.run(port=int(sys.argv[1]) if len(sys.argv) > 1 else 8000)
