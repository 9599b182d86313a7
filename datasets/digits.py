"""The embedded default dataset: the UCI handwritten digits.

scikit-learn ships the 1,797 8x8 grayscale digits (pixel values 0..16) of
the UCI "Optical Recognition of Handwritten Digits" test set inside its
package (`sklearn.datasets.load_digits`), so this dataset needs no
download. `convert_digits.run` turns it into digits_train.tfrecord (1,437
images) and digits_test.tfrecord (360 images): a stratified split with a
fixed seed, 8x8x1 PNGs scaled to 0..255, the same feature keys as mnist.
"""

from datasets import dataset_spec

NUM_TRAIN = 1437
NUM_TEST = 360

SPEC = dataset_spec.DatasetSpec(
    name='digits',
    file_pattern='digits_%s.tfrecord',
    splits_to_sizes={'train': NUM_TRAIN, 'test': NUM_TEST},
    num_classes=10,
    image_channels=1,
    default_image_size=8,
    image_shape=(8, 8, 1),
    default_format='png',
    items_to_descriptions={
        'image': 'A [8 x 8 x 1] grayscale image, values 0..255.',
        'label': 'A single integer between 0 and 9',
    },
    convert_hint=dataset_spec.conversion_command(
        'digits', '%(dataset_dir)s',
        ' (offline: the digits ship with scikit-learn)'))


def get_split(split_name, dataset_dir, file_pattern=None, reader=None):
  """Returns the 'train' or 'test' split; see dataset_spec.open_split."""
  return dataset_spec.open_split(SPEC, split_name, dataset_dir, file_pattern,
                                 reader)
