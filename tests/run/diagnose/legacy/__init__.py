"""The diagnosis, app notes, steadiness and "alongside" as they were computed record by record, before
they read columns (issue 47): kept unchanged, as the oracle test_columns_equal.py checks the column code
against, figure for figure. Not imported by qbench."""
