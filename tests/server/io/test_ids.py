"""Random ids in uuid4().hex's form (reference_server.io.ids)."""

from __future__ import annotations

import os
import uuid

from reference_server.io import ids


def test_ids_are_version_4_uuids_and_all_different_across_reads() -> None:
    made = [ids.random_hex() for _ in range(3 * ids._BATCH + 5)]  # several reads of the OS
    assert len(set(made)) == len(made)
    for value in made:
        assert len(value) == 32 and value == value.lower()
        parsed = uuid.UUID(hex=value)
        assert parsed.version == 4 and parsed.variant == uuid.RFC_4122 and parsed.hex == value


def test_a_forked_child_does_not_repeat_its_parents_ids() -> None:
    ids.random_hex()  # the parent holds unused ids now
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its next id, then out
        os.write(write, ids.random_hex().encode())
        os._exit(0)
    os.waitpid(pid, 0)
    child = os.read(read, 64).decode()
    os.close(read)
    os.close(write)
    assert child != ids.random_hex()
