"""What is sent: the scenario and everything it decides before a request leaves.

    schema.py         Scenario: YAML -> validated config (target, endpoint, payload, load, slo)
    credentials.py    the scenario's `auth:` section: environment references, a run's Secrets
    input_specs.py    one input's generator as the scenario names it (text, image, choice, chat, file...)
    payloads.py       payload section -> seeded request inputs (text, image, audio, files...)
    schedule.py       load section -> Plan: intended send offsets (open loop) or user loops (closed loop)
    trace.py          recorded schedules: a trace file or a past run's intended times (load.trace/replay)
    trace_formats.py  nginx/uvicorn logs, HAR, Mooncake -> trace files; a trace's shape
"""
