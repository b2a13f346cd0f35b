"""What goes in and out of a served function.

    components.py   component wire formats and (pre|post)processing; the file store
    uploads.py      `POST /gradio_api/upload` off the event loop
    decode_pool.py  upload parsing and image decoding in worker processes
    ids.py          random ids in uuid4().hex's form, cheaply
"""
