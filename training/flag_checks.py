"""The range rules of both scripts' flags, and the checks that apply them.

A flag that train_image_classifier.py, eval_image_classifier.py and
export_inference_graph.py share (training/common_flags.py) has one rule,
in SHARED_RANGES; each script checks those and its own (TRAIN_RANGES,
EVAL_RANGES, EXPORT_RANGES).
"""

import math

from absl import flags

from deployment import argument_checks

# The largest count many TensorFlow kernels and the shapes the networks
# write (tf.reshape(net, [batch_size, -1])) hold: an int32's.
MAX_INT32 = 2**31 - 1
# One image of a side of s pixels and 3 channels holds 3 s**2 values: at
# most 26754 pixels a side keeps them an int32 count.
MAX_IMAGE_SIZE = math.isqrt(MAX_INT32 // 3)
# The batch is a dimension of those int32 shapes.
MAX_BATCH_SIZE = MAX_INT32


def _size_ranges(flag, unit, maximum, why):
  """The rules of a size flag: >= 1, and at most `maximum`, for `why`."""
  return ((flag, lambda v: v >= 1, '>= 1 (%s)' % unit),
          (flag, lambda v: v <= maximum,
           'from 1 to %d (%s; %s)' % (maximum, unit, why)))


def _image_size_ranges(flag):
  return _size_ranges(flag, 'pixels', MAX_IMAGE_SIZE,
                      'a larger 3-channel image holds 2**31 values or more, '
                      'beyond TensorFlow\'s int32 counts')


# (flag, condition on its value, what the value must be); see check_ranges.
SHARED_RANGES = _size_ranges(
    'batch_size', 'examples per clone', MAX_BATCH_SIZE,
    'TensorFlow\'s int32 shapes hold no larger batch') + (
    ('num_clones', lambda v: v >= 1, '>= 1'),
    ('labels_offset', lambda v: v >= 0, '>= 0'),
    ('num_preprocessing_threads', lambda v: v >= 1, '>= 1'),
    ('max_image_pixels', lambda v: v >= 1, '>= 1 (height x width)'),
)

TRAIN_RANGES = SHARED_RANGES + (
    ('worker_replicas', lambda v: v >= 1, '>= 1'),
    ('num_ps_tasks', lambda v: v >= 0, '>= 0'),
    ('task', lambda v: v >= 0, '>= 0'),
    ('replicas_to_aggregate', lambda v: v >= 1, '>= 1'),
    ('max_number_of_steps', lambda v: v >= 1, '>= 1'),
    ('num_epochs_per_decay', lambda v: v > 0, '> 0'),
    ('warmup_epochs', lambda v: v >= 0, '>= 0'),
    ('learning_rate', lambda v: v > 0, '> 0'),
    ('label_smoothing', lambda v: 0 <= v < 1, 'in [0, 1)'),
    ('weight_decay', lambda v: v >= 0, '>= 0 (0: no weight decay)'),
    ('moving_average_decay', lambda v: 0 < v < 1, 'in (0, 1)'),
    ('batch_norm_decay', lambda v: 0 < v < 1,
     'in (0, 1) (unset: the network\'s own)'),
) + _image_size_ranges('train_image_size') + (
    ('num_readers', lambda v: v >= 1, '>= 1'),
    ('log_every_n_steps', lambda v: v >= 1, '>= 1'),
    ('save_interval_secs', lambda v: v >= 0,
     '>= 0 (0: checkpoint only at the end)'),
    ('save_summaries_secs', lambda v: v >= 1, '>= 1'),
    ('non_chief_wait_secs', lambda v: v >= 1, '>= 1'),
    ('step_timeout_secs', lambda v: v > 0,
     '> 0 (unset: derived from the step times seen)'),
    ('collective_timeout_secs', lambda v: v > 0, '> 0'),
    ('accumulation_steps', lambda v: v >= 1, '>= 1 (1: no accumulation)'),
    ('replica_averaging_steps', lambda v: v >= 1,
     '>= 1 (unset: average the gradients every step)'),
    ('all_reduce_buffer_bytes', lambda v: v >= 1, '>= 1'),
    # UpdateOptions' bound: the norm is computed in float32.
    ('clip_gradient_norm', argument_checks.fits_float32,
     '> 0 and at most %.7g, float32\'s largest (leave it unset for no '
     'clipping)' % argument_checks.FLOAT32_MAX),
)

EVAL_RANGES = SHARED_RANGES + (
    ('max_num_batches', lambda v: v >= 1, '>= 1 (unset: the whole split)'),
) + _image_size_ranges('eval_image_size')

EXPORT_RANGES = SHARED_RANGES + _image_size_ranges('image_size') + (
    ('saved_model_version', lambda v: v >= 1, '>= 1'),
    ('representative_images', lambda v: v >= 1, '>= 1'),
    ('num_frames', lambda v: v >= 1, '>= 1'),
)


class _WholeNumberParser(flags.IntegerParser):
  """absl's parser of an integer flag, whose refusal of any other text
  ('3e19') gives the range of the flag's rule in `ranges`."""

  def __init__(self, flag, ranges):
    super().__init__()
    self._requirement = [requirement for name, _, requirement in ranges
                         if name == flag][-1]

  def convert(self, argument):
    try:
      return super().convert(argument)
    except ValueError:
      raise ValueError('not a whole number; give one %s'
                       % self._requirement) from None


def DEFINE_whole_number(name, default, help_text, ranges):  # pylint: disable=invalid-name
  """flags.DEFINE_integer, whose refusal of a value that is no whole number
  ('3e19') names the range of the flag's rule in `ranges`:

    flag_checks.DEFINE_whole_number('image_size', None, 'The side of the '
                                    'input images.', flag_checks.EXPORT_RANGES)
  """
  flags.DEFINE(_WholeNumberParser(name, ranges), name, default, help_text)


def check_numbers(f, ranges, problems):
  """check_finite, then check_ranges: every number flag a script reads.

  Returns:
    The names of the flags out of range, as check_ranges.
  """
  check_finite(f, problems)
  return check_ranges(f, ranges, problems)


def check_finite(f, problems):
  """Every float flag is a number: absl parses 'inf' and 'nan' as floats,
  and an infinite rate or decay would pass the range checks."""
  for name in f.names():
    value = getattr(f, name)
    problems.check(not isinstance(value, float) or math.isfinite(value),
                   '--%s must be a finite number, got %s' % (name, value))


def check_image_size(flag, size, model, problems):
  """An image size (--train_image_size, --eval_image_size) the network
  builds at: its VALID convolutions and poolings leave no pixel below its
  `min_image_size` (nets/).

  Args:
    flag: the flag's name.
    size: its value; None (the network's default) and values below 1 (a
      range error already) pass.
    model: the lookup.ModelAndData of --model_name.
    problems: the Problems to add to.
  """
  network_fn = model.network_fn
  minimum = network_fn.min_image_size
  problems.check(
      size is None or size < 1 or size >= minimum,
      '--%s=%s is too small for %s: its layers need images of at least '
      '%dx%d pixels; use --%s=%d or more, or leave it unset for %s\'s '
      'default, %d' % (flag, size, model.model_name, minimum, minimum, flag,
                       minimum, model.model_name,
                       network_fn.default_image_size))


def check_ranges(f, ranges, problems):
  """Checks flags against (name, condition, requirement) rules.

  A flag left at None passes: None means unset for optional flags. So does
  a non-finite float, which check_finite reports.

  Returns:
    The set of the names of the flags out of range: what is built from
    them (an image of --image_size) is not.
  """
  refused = set()
  for name, condition, requirement in ranges:
    value = getattr(f, name)
    if isinstance(value, float) and not math.isfinite(value):
      continue
    if not problems.check(value is None or condition(value),
                          '--%s must be %s, got %s' % (name, requirement,
                                                       value)):
      refused.add(name)
  return refused
