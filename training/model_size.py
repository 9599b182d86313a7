"""Refuses a model too big to build, before anything is written.

A network's variables follow its image size: LeNet's first fully connected
layer takes the whole last feature map, so --train_image_size=2000 asks for
a 61 GiB weight matrix where the default 28 needs 12 MiB. TensorFlow would
fail at the first session, with a traceback about a tensor proto, after the
summary writer had already put an events file in train_dir. This check runs
on the built graph instead, and names the biggest variable and the flag.

  check(tf.global_variables(), '--train_image_size=2000', 'lenet', 28)
"""

from clusters import machine
from training.errors import UsageError

GIB = 1 << 30

# A constant initial value (zeros, ones: the optimizers' slots, biases) goes
# into the graph as a tensor proto, which protobuf caps at 2 GiB; the first
# session fails on it ('Cannot parse tensor from proto').
MAX_VARIABLE_BYTES = 2 * GIB


def _bytes(variable):
  shape = variable.shape
  if not shape.is_fully_defined():
    return 0
  return shape.num_elements() * variable.dtype.base_dtype.size


def _gib(size):
  return '%.1f GiB' % (size / GIB)


def check(variables, size_flag, model_name, default_image_size,
          local_variables=True, available_bytes=None):
  """Raises UsageError when the variables cannot be built or held.

  Args:
    variables: the graph's variables (the model's, and the optimizer's
      slots when training).
    size_flag: the flag that chose the image size, e.g.
      '--train_image_size=2000'.
    model_name: the --model_name, for the message.
    default_image_size: the network's own image size, for the fix.
    local_variables: whether the variables live in this process (not on ps
      tasks); only then does this machine's memory bound their total.
    available_bytes: the memory to compare with; MemAvailable by default.

  Raises:
    UsageError: one variable reaches the 2 GiB limit of constant initial
      values, or all of them take more than the memory available.
  """
  variables = list(variables)
  if not variables:
    return
  sizes = [(_bytes(v), v.op.name, v.shape.as_list()) for v in variables]
  biggest = max(sizes, key=lambda size: size[0])  # The first built.
  total = sum(size for size, _, _ in sizes)
  fix = ('use a smaller image size (%s builds at %d by default)'
         % (model_name, default_image_size))
  if biggest[0] >= MAX_VARIABLE_BYTES:
    raise UsageError(
        '%s: variable %s of %s would take %s (shape %s); TensorFlow cannot '
        'initialise a variable of 2 GiB or more from a constant, as the '
        'optimizer\'s slots are; %s'
        % (size_flag, biggest[1], model_name, _gib(biggest[0]), biggest[2],
           fix))
  if not local_variables:
    return
  if available_bytes is None:
    available_mib = machine.mem_available_mib()
    available_bytes = available_mib and available_mib * (1 << 20)
  if available_bytes is not None and total > available_bytes:
    raise UsageError(
        '%s: the %d variables of %s would take %s (%s the biggest), more '
        'than the %s of memory available; %s'
        % (size_flag, len(sizes), model_name, _gib(total), biggest[1],
           _gib(available_bytes), fix))
