"""Reading the small JSON files sparkpoint keeps in this user's private directories (the
REST jobs directory, the local-state owner records) without trusting what else may be
there: a link, another user's file or a FIFO is passed over, not followed or waited on.
Standard library only (the command line reads job files without importing the runtime)."""

from __future__ import annotations

import json
import os
import stat
from typing import Any


def read_own_json(directory_fd: int, name: str, max_bytes: int) -> Any:
    """The JSON value of the file ``name`` in the directory ``directory_fd`` (at most
    ``max_bytes`` of it), or None unless it is a regular file of this user, not a symbolic
    link, holding valid JSON."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK, dir_fd=directory_fd)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
            return None
        return json.loads(os.read(fd, max_bytes))
    except (OSError, ValueError):
        return None
    finally:
        os.close(fd)
