"""Point results + constraints -> the recommendation: the ranking, its reasons, the code to paste.

    recommend.py     rank, recommend (winner, ranked list with reasons), max_size advice, Gradio code
"""
