"""The dashboard: a read-only web page of one running job, served by the driver.

Reads the job through the driver's public progress and report types only; its routes are
served by the job's server (``rest.job_server``) on the bounded server of ``serving``.
"""
