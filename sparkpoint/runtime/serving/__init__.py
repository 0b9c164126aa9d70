"""HTTP serving on the driver, shared by the dashboard, the REST API and ``/metrics``: a
bounded server (connection cap, per-connection timeouts) and the Host header check.

Imports only the standard library and ``sparkpoint.errors``: the packages that serve a job
(``dashboard``, ``rest``) build on it, never the other way round.
"""
