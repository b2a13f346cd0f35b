"""The event queue, with Gradio's semantics.

    queue.py     the event queue: concurrency groups, dispatcher, batching, ETA, cancel
    runtime.py   the queue's data: functions, events, jobs, concurrency groups
    jobs.py      running one dispatched job: preprocess, call the workload, postprocess
    threads.py   a workload's call handed to its worker thread (the limiter's tokens, without anyio)
    sessions.py  per-session message queues and pending events (the SSE stream)
    streams.py   the SSE responses: /queue/data, /call/..., /heartbeat
    messages.py  sse_v3 messages and the streaming diff
    gradio3.py   Gradio 3.50's queue: its estimations, data gathering at dispatch, messages
"""
