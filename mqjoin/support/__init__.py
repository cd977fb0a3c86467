"""Helpers with no knowledge of the model: number formats and units shared by every view,
a scoped pause of the garbage collector, and waiting for background threads."""
