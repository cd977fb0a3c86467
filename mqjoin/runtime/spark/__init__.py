"""The Spark Structured Streaming engine (the only place that imports pyspark)."""
