"""An example Gradio app whose queue settings come from `qbench sweep --launch` (mode 3).

qbench fills placeholders in the launch command and also sets environment variables for every knob of the
point, so either style works:

    qbench sweep examples/sweep_sleep.yaml --grid concurrency_limit=1,2 --grid max_batch_size=1,4 \
        --launch "python examples/gradio_app.py --port {port} --concurrency-limit {concurrency_limit} \
                  --max-batch-size {max_batch_size}"
    qbench sweep examples/sweep_sleep.yaml --grid concurrency_limit=1,2 \
        --launch "python examples/gradio_app.py"

Environment read (command-line options win): QBENCH_PORT (or GRADIO_SERVER_PORT), QBENCH_CONCURRENCY_LIMIT,
QBENCH_MAX_BATCH_SIZE, QBENCH_MAX_THREADS, QBENCH_MAX_SIZE, QBENCH_DEFAULT_CONCURRENCY_LIMIT.

The event `predict` sleeps `base_ms + per_item_ms x batch size` (a model-like batch cost) and echoes its
text input, like the reference server's `sleep` workload, so results are comparable with modes 1 and 2.
"""

from __future__ import annotations

import argparse
import os
import time

import gradio as gr


def _env_int(name: str, default: int | None) -> int | None:
    value = os.environ.get(f"QBENCH_{name}")
    if value is None or value.lower() in ("", "none", "null"):
        return default
    return int(float(value))


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    port = int(os.environ.get("QBENCH_PORT") or os.environ.get("GRADIO_SERVER_PORT") or 7860)
    parser.add_argument("--port", type=int, default=port)
    parser.add_argument("--concurrency-limit", type=int, default=_env_int("CONCURRENCY_LIMIT", 1))
    parser.add_argument("--max-batch-size", type=int, default=_env_int("MAX_BATCH_SIZE", 1))
    parser.add_argument("--max-threads", type=int, default=_env_int("MAX_THREADS", 40))
    parser.add_argument("--max-size", type=int, default=_env_int("MAX_SIZE", None))
    parser.add_argument(
        "--default-concurrency-limit", type=int, default=_env_int("DEFAULT_CONCURRENCY_LIMIT", 1)
    )
    parser.add_argument("--base-ms", type=float, default=50.0)
    parser.add_argument("--per-item-ms", type=float, default=10.0)
    return parser.parse_args()


def build_demo(args: argparse.Namespace) -> gr.Blocks:
    batched = args.max_batch_size > 1

    def predict(text: str) -> str:
        time.sleep((args.base_ms + args.per_item_ms) / 1000)
        return text

    def predict_batch(texts: list[str]) -> list[list[str]]:
        time.sleep((args.base_ms + args.per_item_ms * len(texts)) / 1000)
        return [list(texts)]

    demo: gr.Blocks
    with gr.Blocks() as demo:
        box = gr.Textbox(label="text")
        out = gr.Textbox(label="echo")
        btn = gr.Button("predict")
        btn.click(
            predict_batch if batched else predict,
            inputs=box,
            outputs=out,
            api_name="predict",
            concurrency_limit=args.concurrency_limit,
            batch=batched,
            max_batch_size=args.max_batch_size,
        )
    demo.queue(default_concurrency_limit=args.default_concurrency_limit, max_size=args.max_size)
    return demo


def main() -> None:
    args = parse_args()
    build_demo(args).launch(
        server_name="127.0.0.1",
        server_port=args.port,
        max_threads=args.max_threads,
        show_error=True,
    )


if __name__ == "__main__":
    main()
