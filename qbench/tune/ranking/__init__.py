"""Point results + constraints -> the recommendation (recommend.py: ranking, max_size, code)."""
