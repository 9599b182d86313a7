"""What a script's input pipeline reads and how: `InputConfig`.

Both scripts make one from their flags once they are validated
(training/run_config.py, eval_image_classifier.py) and read their batches
through `make_dataset`.
"""

import dataclasses
import typing

from datasets import image_check
from datasets import input_pipeline
from training.errors import call_for_flag


@dataclasses.dataclass(frozen=True)
class InputConfig:
  """The input pipeline of a run, under upstream Slim's flag names.

  Attributes:
    dataset_name, dataset_split_name, dataset_dir: the split read.
    labels_offset: subtracted from every label.
    preprocessing_name: the preprocessing; --model_name's when
      --preprocessing_name is unset.
    batch_size: examples per clone per step.
    image_size: the side of the images the network takes
      (--train_image_size or --eval_image_size, else the network's
      default).
    num_readers: files read in parallel.
    num_preprocessing_threads: images decoded and preprocessed in parallel.
    shuffle_seed: seed of the file and record shuffles; None: random.
    max_image_pixels: the largest image decoded (height x width, from its
      header); a larger one stops the script (lookup.reporting_bad_records).
  """
  dataset_name: str
  dataset_split_name: str
  dataset_dir: str
  labels_offset: int
  preprocessing_name: str
  batch_size: int
  image_size: int
  num_readers: int
  num_preprocessing_threads: int
  shuffle_seed: typing.Optional[int] = None
  max_image_pixels: int = image_check.DEFAULT_MAX_IMAGE_PIXELS


def make_dataset(inputs, model, is_training, **kwargs):
  """The tf.data.Dataset of (images, labels) batches `inputs` describes.

  Labels are checked against the classes in the graph, and images against
  inputs.max_image_pixels before they are decoded (see
  lookup.reporting_bad_records).

  Args:
    inputs: an InputConfig.
    model: the lookup.ModelAndData of the run (dataset, preprocessing, the
      record counts read when the dataset was opened).
    is_training: shuffle, and drop the last partial batch.
    **kwargs: more arguments of datasets.input_pipeline.make_dataset
      (num_shards, shard_index, num_epochs).

  Raises:
    UsageError: missing or corrupt files, naming --dataset_dir.
  """
  return call_for_flag(
      '--dataset_dir=%s' % inputs.dataset_dir, input_pipeline.make_dataset,
      model.dataset, model.preprocess_fn, inputs.batch_size,
      inputs.image_size, is_training=is_training,
      num_readers=inputs.num_readers,
      num_preprocessing_threads=inputs.num_preprocessing_threads,
      labels_offset=inputs.labels_offset, seed=inputs.shuffle_seed,
      check_labels=True, record_counts=model.record_counts,
      max_image_pixels=inputs.max_image_pixels, **kwargs)
