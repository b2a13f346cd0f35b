"""A File that takes zip archives only."""

from zipfile import ZipFile

import gradio as gr


def listing(archive: str) -> list[str]:
    with ZipFile(archive) as zfile:
        return [info.filename for info in zfile.infolist()]


demo = gr.Interface(listing, gr.File(file_types=[".zip"], type="filepath"), "json", api_name="listing")

if __name__ == "__main__":
    demo.launch()
