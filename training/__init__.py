"""Pieces of train_image_classifier.py: schedule, optimizers, fine-tuning, hooks; imports tf2_compat, deployment, clusters, nets, preprocessing, datasets."""
