"""Whether a checkpoint holds the variables of the graph that restores it.

Restoring a checkpoint of another network fails deep in the session with a
traceback; restoring one whose shapes differ (another number of classes)
can even succeed for some variables and fail later, after a checkpoint of
the mixture is written. These checks compare names and shapes, read from
the checkpoint's index alone, before any session exists:

  * `misfits`: the variables a checkpoint cannot restore (fine-tuning uses
    it too, with its own exclusions).
  * `check_resume` / `check_eval` / `check_export`: a UsageError naming
    the first one, the checkpoint, and the flags it was trained with when
    they can be told (a resume is also refused when the checkpoint holds
    variables the graph lacks: its next checkpoints would drop them):
    --model_name from the network scope of its variables,
    --dataset_name and --labels_offset from its saved input layout
    (training/input_position.py), against the run's `Choices`.
"""

import collections
import inspect

from tf2_compat.slim_compat import tf
from nets import nets_factory
from training import input_position
from training.errors import UsageError

# What a run chose that a checkpoint can tell it was trained with: a
# refusal names the --model_name, --dataset_name or --labels_offset that
# differs (see trained_with).
Choices = collections.namedtuple(
    'Choices', ['model_name', 'dataset_name', 'labels_offset'])


def by_checkpoint_name(variables):
  """{name in a checkpoint: (variable, full shape)} of graph variables (a
  partitioned variable's parts share their whole's name), or of a Saver's
  {name: variable} var_list."""
  if isinstance(variables, dict):
    return {name: (var, var.shape.as_list())
            for name, var in variables.items()}
  named = {}
  for var in variables:
    info = getattr(var, '_save_slice_info', None)
    named[checkpoint_name(var)] = (var, list(info.full_shape) if info
                                   else var.shape.as_list())
  return named


def checkpoint_name(variable):
  """The name a tf.train.Saver gives `variable` in checkpoints."""
  # A partition of a partitioned variable is saved as a slice of the whole.
  info = getattr(variable, '_save_slice_info', None)
  return info.full_name if info is not None else variable.op.name


def misfits(named_variables, checkpoint_shapes):
  """Yields (name, shape here, shape in the checkpoint or None if it lacks
  the name) for each variable the checkpoint cannot restore.

  Args:
    named_variables: what by_checkpoint_name returns.
    checkpoint_shapes: {name: shape} of the checkpoint's tensors.
  """
  for name, (_, shape) in named_variables.items():
    saved = checkpoint_shapes.get(name)
    if saved is None or list(saved) != shape:
      yield name, shape, None if saved is None else list(saved)


def _default_scope(network):
  scope = inspect.signature(network).parameters.get('scope')
  return scope.default if scope is not None else None


def _model_names(checkpoint_names):
  """The --model_name values whose network scope the checkpoint holds; not
  the video networks (InceptionV1 too), which the scripts refuse."""
  scopes = {name.split('/', 1)[0] for name in checkpoint_names}
  return [model for model, network in sorted(nets_factory.networks_map.items())
          if _default_scope(network) in scopes and
          not hasattr(network, 'default_num_frames')]


def _saved_layout(reader):
  """{field: value} of the input layout saved in the checkpoint, e.g.
  {'dataset': 'digits/train', 'labels_offset': '0', ...}; {} without one."""
  if not reader.has_tensor(input_position.LAYOUT_NAME):
    return {}
  text = reader.get_tensor(input_position.LAYOUT_NAME)
  text = text.decode() if isinstance(text, bytes) else str(text)
  return dict(field.split('=', 1) for field in text.split() if '=' in field)


def trained_with(reader, choices):
  """The flags the checkpoint was trained with that differ from the run's
  Choices, e.g. ['--model_name=lenet']; only those the checkpoint tells."""
  differ = []
  models = _model_names(reader.get_variable_to_shape_map())
  if models and choices.model_name not in models:
    differ.append('--model_name=%s' % ' or '.join(models))
  layout = _saved_layout(reader)
  dataset = layout.get('dataset', '').split('/')[0]
  if dataset and dataset != choices.dataset_name:
    differ.append('--dataset_name=%s' % dataset)
  offset = layout.get('labels_offset')
  if offset is not None and offset != str(choices.labels_offset):
    differ.append('--labels_offset=%s' % offset)
  return differ


def _first_misfit(checkpoint, variables, choices):
  """None when the checkpoint restores `variables`; else (what differs, the
  flags it was trained with as text or None)."""
  reader = tf.train.load_checkpoint(checkpoint)
  found = list(misfits(by_checkpoint_name(variables),
                       reader.get_variable_to_shape_map()))
  if not found:
    return None
  name, shape, saved = found[0]
  what = ('variable %s is not in it' % name if saved is None else
          'variable %s has shape %s here but %s in it' % (name, shape, saved))
  if len(found) > 1:
    what += ' (and %d more variable(s) differ)' % (len(found) - 1)
  return what, ' '.join(trained_with(reader, choices)) or None


def _check(checkpoint, variables, choices, chosen_by, verb, other_way):
  """Raises UsageError unless `checkpoint` restores `variables`: what
  differs, the flags it was trained with, and `other_way` out."""
  misfit = _first_misfit(checkpoint, variables, choices)
  if misfit is None:
    return
  what, flags_text = misfit
  raise UsageError(
      '%s: checkpoint %s does not fit the model built from these flags: %s. '
      '%s, or %s' % (
          chosen_by, checkpoint, what,
          'It was trained with %s: %s with that' % (flags_text, verb)
          if flags_text else
          '%s with the flags it was trained with' % verb.capitalize(),
          other_way))


# Variables a checkpoint can hold that a run's flags may not build, by a
# part of their names, and the flag that builds them.
_BUILT_BY = (
    ('/ExponentialMovingAverage', '--moving_average_decay'),
    ('_quant/', '--quantize_delay'),
    ('loss_scale/', '--precision=mixed_float16'),
    # The optimizers' slots and accumulators.
    ('/Adam', '--optimizer=adam'), ('beta1_power', '--optimizer=adam'),
    ('/Momentum', '--optimizer=momentum'), ('/RMSProp', '--optimizer=rmsprop'),
    ('/Adagrad', '--optimizer=adagrad'), ('/Adadelta', '--optimizer=adadelta'),
    ('/Ftrl', '--optimizer=ftrl'),
)


def not_restored(checkpoint, variables):
  """The names of the variables in `checkpoint` that none of `variables`
  restores, sorted; the input's position (tf.data iterator states and
  training/input_position.py's variables, which every run saves) aside."""
  reader = tf.train.load_checkpoint(checkpoint)
  wanted = by_checkpoint_name(variables)
  return sorted(name for name, dtype in
                reader.get_variable_to_dtype_map().items()
                if name not in wanted and dtype != tf.variant and
                name not in (input_position.LAYOUT_NAME,
                             input_position.FILES_NAME))


def _check_nothing_dropped(train_dir, checkpoint, variables):
  """Raises UsageError if `checkpoint` holds variables that `variables`
  lack: the run would save its next checkpoints without them."""
  dropped = not_restored(checkpoint, variables)
  if not dropped:
    return
  flags = sorted({flag for name in dropped for part, flag in _BUILT_BY
                  if part in name})
  raise UsageError(
      '--train_dir=%s: checkpoint %s holds %d variable(s) that these flags '
      'do not build (%s%s); resuming would save the next checkpoints '
      'without them. %s, or give another --train_dir' % (
          train_dir, checkpoint, len(dropped), dropped[0],
          ', ...' if len(dropped) > 1 else '',
          'It was trained with %s: resume with %s' % (
              ' '.join(flags), 'it' if len(flags) == 1 else 'them')
          if flags else 'Resume with the flags it was trained with'))


def check_resume(train_dir, checkpoint, variables, choices):
  """Raises UsageError unless `checkpoint` (train_dir's latest) restores
  `variables`, the built graph's global variables, and holds no variable
  they lack (a resume without --moving_average_decay would save its
  checkpoints without the averages); `choices` are the run's Choices."""
  _check(checkpoint, variables, choices, '--train_dir=%s' % train_dir,
         'resume', 'give another --train_dir (to fine-tune from it: '
         '--checkpoint_path=%s with an empty --train_dir)' % checkpoint)
  _check_nothing_dropped(train_dir, checkpoint, variables)


def check_eval(checkpoint_path, checkpoint, variables, choices):
  """Raises UsageError unless `checkpoint`, which --checkpoint_path names,
  restores `variables`; `choices` are the run's Choices."""
  _check(checkpoint, variables, choices,
         '--checkpoint_path=%s' % checkpoint_path, 'evaluate',
         'give another --checkpoint_path')


def check_export(checkpoint_path, checkpoint, variables, choices):
  """Raises UsageError unless `checkpoint`, which --checkpoint_path names,
  restores `variables` of the graph to export; `choices` are the export's
  Choices."""
  _check(checkpoint, variables, choices,
         '--checkpoint_path=%s' % checkpoint_path, 'export',
         'give another --checkpoint_path')
