"""Per-network image preprocessing, looked up by network name."""
