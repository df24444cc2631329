"""gate."""
