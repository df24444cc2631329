"""explorer."""
