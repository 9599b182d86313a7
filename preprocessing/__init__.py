"""Per-network image preprocessing, looked up by network name; imports tf2_compat."""
