"""The range rules of both scripts' flags, and the checks that apply them.

A flag that train_image_classifier.py, eval_image_classifier.py and
export_inference_graph.py share (training/common_flags.py) has one rule,
in SHARED_RANGES; each script checks those and its own (TRAIN_RANGES,
EVAL_RANGES, EXPORT_RANGES).
"""

import math

from deployment import argument_checks

# (flag, condition on its value, what the value must be); see check_ranges.
SHARED_RANGES = (
    ('batch_size', lambda v: v >= 1, '>= 1 (examples per clone)'),
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
    ('train_image_size', lambda v: v >= 1, '>= 1 (pixels)'),
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
    ('eval_image_size', lambda v: v >= 1, '>= 1 (pixels)'),
)

EXPORT_RANGES = SHARED_RANGES + (
    ('image_size', lambda v: v >= 1, '>= 1 (pixels)'),
    ('saved_model_version', lambda v: v >= 1, '>= 1'),
    ('representative_images', lambda v: v >= 1, '>= 1'),
    ('num_frames', lambda v: v >= 1, '>= 1'),
)


def check_numbers(f, ranges, problems):
  """check_finite, then check_ranges: every number flag a script reads."""
  check_finite(f, problems)
  check_ranges(f, ranges, problems)


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
  """
  for name, condition, requirement in ranges:
    value = getattr(f, name)
    if isinstance(value, float) and not math.isfinite(value):
      continue
    problems.check(value is None or condition(value),
                   '--%s must be %s, got %s' % (name, requirement, value))
