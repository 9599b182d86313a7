"""Exports trained networks and checks them; imports tf2_compat, datasets, nets, preprocessing, training.

export_inference_graph.py writes frozen GraphDefs, SavedModels and TFLite
files; eval_image_classifier.py --exported_model evaluates them against
their checkpoint. Like `training`, it runs from a checkout and is not
installed by `pip install .`.
"""
