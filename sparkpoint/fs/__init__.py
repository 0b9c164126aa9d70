"""One filesystem interface over pyarrow.fs and fsspec (file, s3, gs, hdfs, memory)."""

from sparkpoint.fs.base import FileInfo, FileSystem
from sparkpoint.fs.registry import configure, get_filesystem

__all__ = ["FileInfo", "FileSystem", "configure", "get_filesystem"]
