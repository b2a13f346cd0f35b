"""The settings being tuned (the bottom room of tune/: it imports only run/).

    versions.py      Gradio's queue knobs per release, their equivalents, the code to paste
    frameworks.py    LitServe's, BentoML's, Ray Serve's and TorchServe's own knobs, equivalents and code
    grid.py          knob axes and linked variables -> the points to measure
    reference.py  a point's knobs -> reference server settings (relaunch) or an /admin/config body (live)
"""
