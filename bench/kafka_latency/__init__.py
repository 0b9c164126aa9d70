"""Kafka-to-Kafka latency benchmark of sparkpoint, Spark Structured Streaming and PyFlink
(``python -m bench.kafka_latency``; see ``__main__``)."""
