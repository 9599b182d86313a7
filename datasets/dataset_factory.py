"""Looks up a dataset by name: `get_dataset('flowers', 'train', DIR)`.

    name       splits              classes  files in dataset_dir
    digits     train 1437/test 360      10  digits_%s.tfrecord (embedded)
    mnist      train 60000/test 10000   10  mnist_%s.tfrecord
    cifar10    train 50000/test 10000   10  cifar10_%s.tfrecord
    flowers    train 3320/validation 350 5  flowers_%s_*.tfrecord
    imagenet   train 1281167/val 50000 1001 %s-* (label 0 = background)
    folder     from split_sizes.txt     from labels.txt  folder_%s_*.tfrecord
    synthetic  any                      configurable, no files

`download_and_convert_data.py` creates the files of all but imagenet and
synthetic.
"""

from datasets import cifar10
from datasets import digits
from datasets import flowers
from datasets import folder
from datasets import imagenet
from datasets import mnist
from datasets import synthetic

datasets_map = {
    'cifar10': cifar10,
    'digits': digits,
    'flowers': flowers,
    'folder': folder,
    'imagenet': imagenet,
    'mnist': mnist,
    'synthetic': synthetic,
}


def get_dataset(name, split_name, dataset_dir, file_pattern=None, reader=None,
                **dataset_options):
  """Returns one split of a dataset as a slim.dataset.Dataset.

  Args:
    name: a key of `datasets_map`, e.g. 'digits'.
    split_name: e.g. 'train', 'test' or 'validation' (depends on the data).
    dataset_dir: the folder of the TFRecord files (ignored by 'synthetic').
    file_pattern: overrides the dataset's file glob; one `%s` for the split.
    reader: the TF reader class for slim's DatasetDataProvider.
    **dataset_options: options of the 'synthetic' dataset (image_size,
      channels, num_classes, num_samples, seed).

  Returns:
    A slim.dataset.Dataset; see dataset_spec.open_split for its attributes.

  Raises:
    ValueError: unknown dataset or split name.
    FileNotFoundError: dataset_dir or the split's files are missing; the
      message gives the command that creates them.
  """
  if name not in datasets_map:
    raise ValueError('unknown dataset name %r; known datasets: %s'
                     % (name, ', '.join(sorted(datasets_map))))
  return datasets_map[name].get_split(split_name, dataset_dir, file_pattern,
                                      reader, **dataset_options)
