"""PyFlink's ``JobStatus``: the states a job goes through, with Flink's terminal-state rules
(``get_job_status()`` returns it; the driver's own status enum maps onto it by name)."""

from __future__ import annotations

from enum import Enum

__all__ = ["JobStatus"]


class JobStatus(Enum):
    """Possible states of a job, numbered as PyFlink numbers them."""

    CREATED = 0
    RUNNING = 1
    FAILING = 2
    FAILED = 3
    CANCELLING = 4
    CANCELED = 5
    FINISHED = 6
    RESTARTING = 7
    SUSPENDED = 8
    RECONCILING = 9

    def is_globally_terminal_state(self) -> bool:
        """Whether the job is complete and can neither fail nor be restarted any more
        (FINISHED, CANCELED, FAILED; Flink's ``TerminalState.GLOBALLY``)."""
        return self in (JobStatus.FINISHED, JobStatus.CANCELED, JobStatus.FAILED)

    def is_terminal_state(self) -> bool:
        """Whether the job's execution has ended on this master: the globally terminal
        states and SUSPENDED (Flink's ``TerminalState.LOCALLY``)."""
        return self.is_globally_terminal_state() or self is JobStatus.SUSPENDED
