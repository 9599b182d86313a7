"""training.model_size: a model too big to build is refused by name."""

import re

import pytest

from clusters import machine
from tf2_compat.slim_compat import tf
from training import model_size
from training.errors import UsageError

MIB = 1 << 20


def _variables(*shapes):
  return [tf.get_variable('v%d' % i, shape=shape, dtype=tf.float32)
          for i, shape in enumerate(shapes)]


def test_a_variable_of_2_gib_names_itself_and_the_flag(graph):
  variables = _variables([10, 10], [1 << 19, 1 << 10], [1 << 19, 1 << 10])
  with pytest.raises(UsageError, match=re.escape(
      '--train_image_size=900: variable v1 of lenet would take 2.0 GiB '
      '(shape [524288, 1024]); TensorFlow cannot initialise a variable of '
      "2 GiB or more from a constant, as the optimizer's slots are; use a "
      'smaller image size (lenet builds at 28 by default)')):
    model_size.check(variables, '--train_image_size=900', 'lenet', 28,
                     available_bytes=1 << 40)


def test_a_variable_just_under_2_gib_is_built(graph):
  model_size.check(_variables([(1 << 19) - 1, 1 << 10]), '--x=1', 'lenet',
                   28, available_bytes=1 << 40)
  with tf.Graph().as_default():  # One row more reaches the limit.
    with pytest.raises(UsageError, match='variable v0 of lenet would take '
                       '2.0 GiB'):
      model_size.check(_variables([1 << 19, 1 << 10]), '--x=1', 'lenet', 28,
                       available_bytes=1 << 40)


def test_variables_beyond_the_memory_available_are_refused(graph):
  variables = _variables([256, MIB // 4], [256, MIB // 4])  # 256 MiB each.
  with pytest.raises(UsageError, match=re.escape(
      '--train_image_size=300: the 2 variables of vgg_a would take 0.5 GiB '
      '(v0 the biggest), more than the 0.4 GiB of memory available; use a '
      'smaller image size (vgg_a builds at 224 by default)')):
    model_size.check(variables, '--train_image_size=300', 'vgg_a', 224,
                     available_bytes=400 * MIB)
  model_size.check(variables, '--train_image_size=300', 'vgg_a', 224,
                   available_bytes=600 * MIB)


def test_variables_on_ps_tasks_are_not_bound_by_this_machine(graph):
  variables = _variables([256, MIB // 4], [256, MIB // 4])
  model_size.check(variables, '--train_image_size=300', 'vgg_a', 224,
                   local_variables=False, available_bytes=400 * MIB)
  with pytest.raises(UsageError, match='more than the 0.4 GiB'):
    model_size.check(variables, '--train_image_size=300', 'vgg_a', 224,
                     local_variables=True, available_bytes=400 * MIB)


def test_the_memory_available_is_that_the_launcher_checks(graph,
                                                          monkeypatch):
  # One figure for both: clusters.machine's MemAvailable, in MiB.
  monkeypatch.setattr(machine, 'mem_available_mib', lambda: 400)
  variables = _variables([256, MIB // 4], [256, MIB // 4])
  with pytest.raises(UsageError, match='more than the 0.4 GiB of memory '
                     'available'):
    model_size.check(variables, '--train_image_size=300', 'vgg_a', 224)
