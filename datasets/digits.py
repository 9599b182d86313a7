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

SPEC = dataset_spec.converted(
    'digits', 'digits_%s.tfrecord', {'train': NUM_TRAIN, 'test': NUM_TEST},
    num_classes=10, image_shape=(8, 8, 1), default_format='png',
    source='offline: the digits ship with scikit-learn')

get_split = dataset_spec.split_getter(SPEC)
