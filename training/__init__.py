"""Pieces of train_image_classifier.py: schedule, optimizers, fine-tuning, hooks."""
