"""Local stand-ins for external services, real enough for the real client libraries to talk to."""
