"""Datasets in the TF-Slim TFRecord layout, their conversion and reading; imports tf2_compat, preprocessing."""
