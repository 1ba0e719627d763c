"""Streamable HTTP behaviour: both eras, security, operations, concurrency, the official client."""
