"""The run's records: the flat contract every later stage reads, and their files.

    schema.py         RequestRecord, one per scheduled request; records.jsonl and records.parquet
    spill.py          records.parquet written as the run goes (spills), sealed at the end
    columns.py        the records as numpy columns, read from disk a few at a time
    gap_histogram.py  a record's gaps as a compact, mergeable log-bucket histogram

Design: docs/design/records-and-results.md.
"""
