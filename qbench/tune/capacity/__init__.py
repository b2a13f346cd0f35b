"""`qbench capacity`: the highest rate that is steady and meets the SLO, searched against a live server.

    bisect.py        the search (bracket and bisect, confirm, a stalled host measured again): pure logic
    probe.py         one probe judged (the SLO, the steady state, a stalled host) and how long it lasts
    prober.py        Prober: the probes of one scenario against one live server, in numbered folders
    answer.py        the answer in words (capacity.json's `answer`)
    command.py       `qbench capacity`: its config, the search, recheck, confirmation, and its folder
    console.py       what `qbench capacity` shows: a line per probe, the table, the answer
"""
