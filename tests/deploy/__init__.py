"""Submitting jobs as Spark users do: ``sparkpoint run``, packed environments, bare workers."""
