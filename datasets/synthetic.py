"""Random images generated in the graph, for benchmarks: no files at all.

    dataset = dataset_factory.get_dataset('synthetic', 'train', None,
                                          image_size=224, num_classes=1000)

The returned Dataset has `is_synthetic=True`, no data sources and no
decoder; `input_pipeline.make_dataset` generates image i of the split from
a stateless random op seeded with (seed, i), so every run sees the same
images, and preprocesses them like decoded ones.
"""

from tf2_compat.slim_compat import slim

SPLITS = ('train', 'validation', 'test')


def get_split(split_name, dataset_dir=None, file_pattern=None, reader=None,
              image_size=224, channels=3, num_classes=1000,
              num_samples=10000, seed=0):
  """Returns a synthetic slim.dataset.Dataset.

  Args:
    split_name: 'train', 'validation' or 'test' (they differ by seed).
    dataset_dir: ignored, accepted for the common signature.
    file_pattern: ignored.
    reader: ignored.
    image_size: side of the square uint8 images, or (height, width).
    channels: 1 or 3.
    num_classes: labels are uniform in [0, num_classes).
    num_samples: images per epoch.
    seed: base seed of the images and labels.

  Raises:
    ValueError: an unknown split or a non-positive size.
  """
  del dataset_dir, file_pattern, reader  # No files to read.
  if split_name not in SPLITS:
    raise ValueError('split %r is not a split of dataset %r; valid splits: %s'
                     % (split_name, 'synthetic', ', '.join(SPLITS)))
  height, width = ((image_size, image_size) if isinstance(image_size, int)
                   else tuple(image_size))
  for what, value in (('image height', height), ('image width', width),
                      ('num_classes', num_classes),
                      ('num_samples', num_samples)):
    if value < 1:
      raise ValueError('synthetic %s must be >= 1, got %d' % (what, value))
  if channels not in (1, 3):
    raise ValueError('synthetic channels must be 1 or 3, got %d' % channels)
  return slim.dataset.Dataset(
      data_sources=[],
      reader=None,
      decoder=None,
      num_samples=num_samples,
      items_to_descriptions={
          'image': 'A random [%d x %d x %d] uint8 image.'
                   % (height, width, channels),
          'label': 'A random integer in [0, %d).' % num_classes,
      },
      num_classes=num_classes,
      labels_to_names=None,
      name='synthetic',
      split_name=split_name,
      default_image_size=height,
      image_shape=(height, width, channels),
      image_channels=channels,
      keys_to_features=None,
      is_synthetic=True,
      seed=seed + SPLITS.index(split_name))
