"""A read-only live dashboard and Prometheus /metrics for a server with the module."""
