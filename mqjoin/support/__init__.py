"""Helpers with no knowledge of the model: number formats and units shared by every view,
and a scoped pause of the garbage collector."""
