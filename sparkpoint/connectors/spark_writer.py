"""``SparkWriterSink``: each completed checkpoint's records written exactly once through a
Spark batch writer (``parquet``, ``jdbc``, any ``format``).

Tasks stage their epoch's records as Parquet files under ``staging_path`` (the committable
names the file). When a checkpoint completes, the driver reads the staged files of the
epochs it covers as one DataFrame (built on the executors, never collected) and hands it
to a *target* that writes and publishes it under a commit id derived from the staged file
names, so a redo after a crash finds the same id:

- files (``FileTarget``): Spark writes ``<path>/_sparkpoint_staging/<id>``, which is then
  renamed to ``<path>/sparkpoint_commit=<id>`` (one atomic directory rename on POSIX and
  HDFS); a published directory is never written again.
- JDBC (``JdbcTarget``): Spark writes a staging table; one database transaction then copies
  it into the table and records the id in a commit table (a primary key), so a commit id is
  applied at most once, and a redo skips it.
"""

from __future__ import annotations

import hashlib
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from sparkpoint.connectors.sink import Sink, SinkWriter
from sparkpoint.fs import get_filesystem

__all__ = ["FileTarget", "JdbcTarget", "SparkWriterSink", "WriterTarget", "commit_id"]

ROW_ID = "_sparkpoint_row"
COMMIT_PARTITION = "sparkpoint_commit"

#: The steps of a commit, in order, passed to ``SparkWriterSink.on_commit_step``.
COMMIT_STEPS = ("before-write", "after-write", "after-publish")


def commit_id(committables: Sequence[Sequence[Any]]) -> str:
    """The id of one commit: its epoch range and a hash of its staged file names (unique per
    task attempt), the same when the commit is redone after a crash."""
    epochs = [int(c[1]) for c in committables]
    digest = hashlib.sha1("\n".join(sorted(str(c[3]) for c in committables)).encode())
    return f"e{min(epochs)}-{max(epochs)}-{digest.hexdigest()[:16]}"


def _arrow_schema(schema: Any) -> Any:
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(schema)


def _spark_schema(schema: Any) -> Any:
    """A ``StructType`` from a ``StructType`` or a DDL string (``"k STRING, n BIGINT"``)."""
    from pyspark.sql.types import StructType

    if isinstance(schema, StructType):
        return schema
    if isinstance(schema, str):
        from pyspark.sql.types import _parse_datatype_string

        parsed = _parse_datatype_string(schema)
        if isinstance(parsed, StructType):
            return parsed
    raise TypeError(
        f"SparkWriterSink schema must be a StructType or a DDL string such as "
        f"'word STRING, n BIGINT', got {schema!r}"
    )


class _StagingWriter(SinkWriter):
    """Stages one task's epoch output as one Parquet file (written at ``prepare_commit``)."""

    def __init__(
        self, sink: SparkWriterSink, job_id: str, epoch: int, subtask: int, attempt: int
    ) -> None:
        self._sink = sink
        self._meta = (job_id, epoch, subtask, attempt)
        self._rows: list[Any] = []

    def write(self, values: list[Any]) -> None:
        self._rows.extend(values)

    def prepare_commit(self) -> list[Any]:
        if not self._rows:
            return []
        import pyarrow as pa
        import pyarrow.parquet as pq

        job_id, epoch, subtask, attempt = self._meta
        table = pa.Table.from_arrays(self._sink.columns(self._rows), schema=self._sink.arrow_schema)
        path = (
            f"{self._sink.staging_path.rstrip('/')}/{job_id}/"
            f"e{epoch}-s{subtask}-a{attempt}-{uuid.uuid4().hex}.parquet"
        )
        fs = get_filesystem(path)
        fs.mkdirs(fs.parent(path))
        with fs.open_output(path) as out:
            pq.write_table(table, out)
        return [(job_id, epoch, subtask, path, table.num_rows)]


class WriterTarget(ABC):
    """Where a commit's DataFrame goes: written under a commit id, then published once."""

    @abstractmethod
    def is_committed(self, spark: Any, cid: str) -> bool:
        """Whether commit ``cid`` was published already."""

    @abstractmethod
    def write(self, spark: Any, df: Any, cid: str) -> None:
        """Write ``df`` where readers do not see it yet (idempotent: overwrites)."""

    @abstractmethod
    def publish(self, spark: Any, cid: str, info: Mapping[str, Any]) -> None:
        """Make the write of ``cid`` visible, at most once."""

    def cleanup(self, spark: Any, cid: str) -> None:  # noqa: B027
        """Remove what a published or abandoned write of ``cid`` left (nothing by default)."""


class FileTarget(WriterTarget):
    """A file format (``parquet``, ``orc``, ``json``, ``csv``...): one directory per commit,
    ``<path>/sparkpoint_commit=<id>``, published by renaming Spark's finished output."""

    def __init__(self, fmt: str, path: str, options: Mapping[str, str] | None = None) -> None:
        self.format = fmt
        self.path = path.rstrip("/")
        self.options = dict(options or {})

    def staged_dir(self, cid: str) -> str:
        """Spark's output for commit ``cid`` before it is published (hidden from readers)."""
        return f"{self.path}/_sparkpoint_staging/{cid}"

    def published_dir(self, cid: str) -> str:
        """The commit's directory readers see (a partition ``sparkpoint_commit=<id>``)."""
        return f"{self.path}/{COMMIT_PARTITION}={cid}"

    def is_committed(self, spark: Any, cid: str) -> bool:
        return get_filesystem(self.path).exists(self.published_dir(cid))

    def write(self, spark: Any, df: Any, cid: str) -> None:
        df.drop(ROW_ID).write.format(self.format).options(**self.options).mode("overwrite").save(
            self.staged_dir(cid)
        )

    def publish(self, spark: Any, cid: str, info: Mapping[str, Any]) -> None:
        fs = get_filesystem(self.path)
        staged = self.staged_dir(cid)
        if not fs.exists(f"{staged}/_SUCCESS"):
            raise RuntimeError(f"Spark's output for commit {cid} is incomplete: {staged}")
        fs.rename(staged, self.published_dir(cid))

    def cleanup(self, spark: Any, cid: str) -> None:
        get_filesystem(self.path).delete(self.staged_dir(cid), recursive=True)


class JdbcTarget(WriterTarget):
    """A JDBC table: Spark writes a staging table ``<table>_sp_<id>``; one transaction copies
    it into ``table`` (each staged row once, even if a retried Spark task wrote it twice)
    and inserts the id into ``commit_table``, whose primary key refuses a second commit."""

    def __init__(
        self,
        url: str,
        table: str,
        properties: Mapping[str, str] | None = None,
        commit_table: str = "sparkpoint_commits",
    ) -> None:
        self.url = url
        self.table = table
        self.properties = dict(properties or {})
        self.commit_table = commit_table
        self._prepared = False

    def staging_table(self, cid: str) -> str:
        """The staging table of commit ``cid``."""
        return f"{self.table}_sp_{cid.replace('-', '_')}"

    def _resolve_driver(self, spark: Any) -> str:
        """The JDBC driver class: the ``driver`` property, or the one on Spark's classpath
        that accepts the URL (then set as ``driver``, which Spark's writer needs too: jars
        of spark.jars are on the context class loader, which DriverManager does not see)."""
        name = self.properties.get("driver")
        if name:
            return name
        jvm = spark._jvm
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        found = jvm.java.util.ServiceLoader.load(
            jvm.java.lang.Class.forName("java.sql.Driver"), loader
        ).iterator()
        while found.hasNext():
            candidate = found.next()
            if candidate.acceptsURL(self.url):
                name = str(candidate.getClass().getName())
                self.properties["driver"] = name
                return name
        raise ValueError(
            f"no JDBC driver on Spark's classpath accepts the URL {self.url!r}: add its jar "
            "to spark.jars (or name its class in the 'driver' property)"
        )

    def _connect(self, spark: Any) -> Any:
        jvm = spark._jvm
        name = self._resolve_driver(spark)
        props = jvm.java.util.Properties()
        for k, v in self.properties.items():
            if k != "driver":
                props.setProperty(k, v)
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        driver = loader.loadClass(name).newInstance()
        conn = driver.connect(self.url, props)
        if conn is None:
            raise ValueError(f"JDBC driver {name} does not accept the URL {self.url!r}")
        return conn

    def _prepare(self, spark: Any, df: Any) -> None:
        """Create the commit table and (through Spark, from the schema) the target table."""
        if self._prepared:
            return
        self._resolve_driver(spark)
        df.drop(ROW_ID).limit(0).write.jdbc(self.url, self.table, "append", self.properties)
        conn = self._connect(spark)
        try:
            st = conn.createStatement()
            st.executeUpdate(
                f"CREATE TABLE IF NOT EXISTS {self.commit_table} ("
                "commit_id VARCHAR(64) PRIMARY KEY, target_table VARCHAR(255) NOT NULL, "
                "job_id VARCHAR(64), first_epoch BIGINT, last_epoch BIGINT, row_count BIGINT)"
            )
            st.close()
        finally:
            conn.close()
        self._prepared = True

    def is_committed(self, spark: Any, cid: str) -> bool:
        conn = self._connect(spark)
        try:
            meta = conn.getMetaData()
            tables = meta.getTables(None, None, self.commit_table, None)
            exists = tables.next()
            tables.close()
            if not exists:
                return False
            ps = conn.prepareStatement(f"SELECT 1 FROM {self.commit_table} WHERE commit_id = ?")
            ps.setString(1, cid)
            rs = ps.executeQuery()
            found = bool(rs.next())
            ps.close()
            return found
        finally:
            conn.close()

    def write(self, spark: Any, df: Any, cid: str) -> None:
        self._prepare(spark, df)
        df.write.jdbc(self.url, self.staging_table(cid), "overwrite", self.properties)

    def publish(self, spark: Any, cid: str, info: Mapping[str, Any]) -> None:
        dialect = spark._jvm.org.apache.spark.sql.jdbc.JdbcDialects.get(self.url)
        cols = ", ".join(dialect.quoteIdentifier(c) for c in info["columns"])
        row = dialect.quoteIdentifier(ROW_ID)
        conn = self._connect(spark)
        try:
            conn.setAutoCommit(False)
            st = conn.createStatement()
            st.executeUpdate(
                f"INSERT INTO {self.table} ({cols}) SELECT {cols} FROM ("
                f"SELECT {cols}, ROW_NUMBER() OVER (PARTITION BY {row} ORDER BY {row}) AS sp_rn "
                f"FROM {self.staging_table(cid)}) s WHERE sp_rn = 1"
            )
            st.close()
            ps = conn.prepareStatement(
                f"INSERT INTO {self.commit_table} (commit_id, target_table, job_id, "
                "first_epoch, last_epoch, row_count) VALUES (?, ?, ?, ?, ?, ?)"
            )
            ps.setString(1, cid)
            ps.setString(2, self.table)
            ps.setString(3, str(info["job_id"]))
            ps.setLong(4, int(info["first_epoch"]))
            ps.setLong(5, int(info["last_epoch"]))
            ps.setLong(6, int(info["rows"]))
            ps.executeUpdate()
            ps.close()
            conn.commit()
        except Exception:
            conn.rollback()
            raise
        finally:
            conn.close()

    def cleanup(self, spark: Any, cid: str) -> None:
        conn = self._connect(spark)
        try:
            st = conn.createStatement()
            st.executeUpdate(f"DROP TABLE IF EXISTS {self.staging_table(cid)}")
            st.close()
        finally:
            conn.close()


class SparkWriterSink(Sink):
    """Exactly-once output through a Spark batch writer, one commit per completed checkpoint.

    ``schema`` (a ``StructType`` or DDL string) types the records: tuples or ``Row``s in
    field order, or dicts by field name. ``staging_path`` must be reachable by the
    executors and the driver (a shared or object-store path on a cluster).
    """

    runs_spark_jobs = True  # each commit's write

    def __init__(
        self,
        schema: Any,
        target: WriterTarget,
        staging_path: str,
        transform: Callable[[Any], Any] | None = None,
    ) -> None:
        self.schema = _spark_schema(schema)
        self.arrow_schema = _arrow_schema(self.schema)
        self.target = target
        self.staging_path = staging_path
        self.transform = transform
        #: Called with (step, commit id) at each of ``COMMIT_STEPS`` (observability, faults).
        self.on_commit_step: Callable[[str, str], None] | None = None

    @staticmethod
    def for_format(
        fmt: str,
        path: str,
        schema: Any,
        options: Mapping[str, str] | None = None,
        staging_path: str | None = None,
    ) -> SparkWriterSink:
        """Files of ``fmt`` (``parquet``, ``orc``, ``json``, ``csv``...) under ``path``."""
        if not path:
            raise ValueError("SparkWriterSink.for_format needs an output path")
        staging = staging_path or f"{path.rstrip('/')}/_sparkpoint_staging/records"
        return SparkWriterSink(schema, FileTarget(fmt, path, options), staging)

    @staticmethod
    def parquet(path: str, schema: Any, staging_path: str | None = None) -> SparkWriterSink:
        """Parquet files under ``path``."""
        return SparkWriterSink.for_format("parquet", path, schema, staging_path=staging_path)

    @staticmethod
    def jdbc(
        url: str,
        table: str,
        schema: Any,
        staging_path: str,
        properties: Mapping[str, str] | None = None,
        commit_table: str = "sparkpoint_commits",
    ) -> SparkWriterSink:
        """A JDBC table (created from ``schema`` when missing); the JDBC driver's jar must be
        on Spark's classpath (``spark.jars``)."""
        return SparkWriterSink(
            schema, JdbcTarget(url, table, properties, commit_table), staging_path
        )

    def columns(self, rows: Sequence[Any]) -> list[Any]:
        """``rows`` as one Arrow array per schema field (a clear error for a bad record)."""
        import pyarrow as pa

        names = self.schema.fieldNames()
        cols: list[list[Any]] = [[] for _ in names]
        for r in rows:
            if isinstance(r, dict):
                values = [r.get(n) for n in names]
            elif isinstance(r, (tuple, list)) and len(r) == len(names):
                values = list(r)
            else:
                raise TypeError(
                    f"SparkWriterSink: record {r!r} does not match the schema {names}: "
                    f"give a tuple/Row of {len(names)} fields or a dict by field name"
                )
            for c, v in zip(cols, values, strict=True):
                c.append(v)
        return [pa.array(c, type=f.type) for c, f in zip(cols, self.arrow_schema, strict=True)]

    def create_writer(
        self, job_id: str, epoch: int, subtask_index: int, parallelism: int, attempt: int
    ) -> SinkWriter:
        return _StagingWriter(self, job_id, epoch, subtask_index, attempt)

    def _step(self, step: str, cid: str) -> None:
        if self.on_commit_step is not None:
            self.on_commit_step(step, cid)

    def commit(self, committables: Sequence[Any]) -> None:
        items = sorted({tuple(c) for c in committables}, key=lambda c: (c[1], c[2], c[3]))
        if not items:
            return
        from pyspark.sql import SparkSession
        from pyspark.sql import functions as F

        spark = SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()
        cid = commit_id(items)
        self._step("before-write", cid)
        if not self.target.is_committed(spark, cid):
            missing = [c[3] for c in items if not get_filesystem(str(c[3])).exists(str(c[3]))]
            if missing:
                raise FileNotFoundError(
                    f"SparkWriterSink: commit {cid} is not published and its staged files "
                    f"are gone (removed by hand or by a failed job's cleanup): {missing[:5]}"
                )
            df = spark.read.schema(self.schema).parquet(*[c[3] for c in items])
            if self.transform is not None:
                df = self.transform(df)
            df = df.withColumn(ROW_ID, F.monotonically_increasing_id())
            self.target.write(spark, df, cid)
            self._step("after-write", cid)
            info = {
                "columns": [c for c in df.columns if c != ROW_ID],
                "job_id": items[0][0],
                "first_epoch": items[0][1],
                "last_epoch": items[-1][1],
                "rows": sum(int(c[4]) for c in items),
            }
            self.target.publish(spark, cid, info)
            self._step("after-publish", cid)
        self.target.cleanup(spark, cid)
        self.abort(items)

    def abort(self, committables: Sequence[Any]) -> None:
        """Delete staged files (those of committed epochs too, once published)."""
        for c in committables:
            get_filesystem(str(c[3])).delete(str(c[3]))

    def cleanup_job(self, job_id: str) -> None:
        """Remove the job's staging directory (files of task attempts Spark did not keep)."""
        path = f"{self.staging_path.rstrip('/')}/{job_id}"
        get_filesystem(path).delete(path, recursive=True)
