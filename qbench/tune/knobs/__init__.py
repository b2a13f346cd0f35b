"""The settings being tuned: Gradio's queue knobs per release, the grid of points they span, and a point's
knobs as the reference server's settings. The bottom room of tune/: it imports only run/.

    versions.py      Gradio's queue knobs per release, their equivalents, the code to paste
    frameworks.py    another framework's own knobs (LitServe's), the equivalents it lacks, its code
    grid.py          knob axes and linked variables -> the points to measure
    server_knobs.py  a point's knobs -> reference server settings (relaunch) or an /admin/config body (live)
"""
