"""Formats under PyFlink's names: ``pyflink.datastream.formats`` → here."""
