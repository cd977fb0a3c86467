"""The Spark Structured Streaming engine (the only place that imports pyspark)."""

from pathlib import Path

#: Spark's log4j settings for the driver JVM: its own log off unless ``MQJOIN_SPARK_LOG`` asks
LOG4J = Path(__file__).with_name("log4j2.properties")
