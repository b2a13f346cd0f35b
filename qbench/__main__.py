from qbench.cli import app

app()
