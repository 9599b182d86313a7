"""The steps of a converter that writes one TFRecord file per split.

digits, mnist and cifar10 are kept so. A converter says which original
files it reads and how to read each split's images and labels from them;
`convert` does the rest, in one order: keep a conversion that is already
whole, find the originals (never fetching them), then write every split
and labels.txt crash-safely, the images as PNGs.
"""

import os

from datasets import converted_outputs
from datasets import dataset_utils
from datasets import source_files
from datasets.image_coder import ImageCoder


def output_paths(spec, dataset_dir):
  """{split: dataset_dir/(file_pattern % split), ..., 'labels': labels.txt}
  for the splits of `spec`, a dataset_spec.DatasetSpec."""
  paths = {split: os.path.join(dataset_dir, spec.file_pattern % split)
           for split in spec.splits_to_sizes}
  paths['labels'] = os.path.join(dataset_dir, dataset_utils.LABELS_FILENAME)
  return paths


def convert(spec, dataset_dir, split_images, source_dir=None, originals=None,
            class_names=None):
  """Converts the dataset of `spec` unless dataset_dir already holds it, whole.

  Args:
    spec: the dataset's DatasetSpec: its name, file pattern, splits and
      classes.
    dataset_dir: output folder; created if missing.
    split_images: fn(sources) -> {split: iterable of (uint8 image [height,
      width, channels], class id)}, where sources is {filename: path} of
      the originals; the iterables are read one split after the other.
    source_dir: folder holding the originals; defaults to dataset_dir.
    originals: {filename: the URL it is published at} of the files the
      conversion reads; None for data that needs no file.
    class_names: fn(sources) -> {class id: name} for labels.txt; by
      default each class is named by its id.

  Returns:
    {split: path, ..., 'labels': path}.

  Raises:
    source_files.MissingSourceError: an original is missing (the message
      names it, its URL and where to put it).
  """
  paths = output_paths(spec, dataset_dir)
  if converted_outputs.reuse_if_whole(spec.name, dataset_dir, paths,
                                      spec.splits_to_sizes, spec.num_classes):
    return paths
  sources = source_files.require_source_files(
      spec.name, source_dir or dataset_dir, originals or {})
  os.makedirs(dataset_dir, exist_ok=True)
  with ImageCoder() as coder:
    images = split_images(sources)
    dataset_utils.write_tfrecord_shards(
        [_png_records(coder, images[split]) for split in spec.splits_to_sizes],
        [paths[split] for split in spec.splits_to_sizes])
  if class_names is None:
    names = {i: str(i) for i in range(spec.num_classes)}
  else:
    names = class_names(sources)
  dataset_utils.write_label_file(names, dataset_dir)
  return paths


def _png_records(coder, images_and_labels):
  """Yields the serialized tf.Example of each (image, class id), as a PNG."""
  for image, label in images_and_labels:
    yield dataset_utils.image_to_tfexample(
        coder.encode_png(image), b'png', image.shape[0], image.shape[1],
        int(label)).SerializeToString()
