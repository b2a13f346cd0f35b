"""`qbench capacity`: the highest rate that is steady and meets the SLO, searched against a live server.

    search.py        the search (bracket and bisect, confirm, a stalled host measured again): pure logic
    capacity_run.py  capacity probes against a live server; `qbench capacity` and its folder
    console.py       what `qbench capacity` shows: a line per probe, the table, the answer
"""
