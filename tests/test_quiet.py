"""tf2_compat.quiet: the library lines nobody can act on stay off stderr."""

import logging
import os
import re
import subprocess
import sys
import warnings

import pytest

from tf2_compat import quiet
from tests.script_runner import REPO

# Builds what used to print every kind of noise: the layers and optimizers a
# training run uses, an unfused batch norm, a zero-scale regularizer (at INFO
# verbosity), a session; then writes one line of each kind a user must see.
PROGRAM = '''
import warnings
from tf2_compat.slim_compat import slim, tf
tf.logging.set_verbosity(tf.logging.INFO)
with tf.Graph().as_default():
  net = slim.conv2d(tf.ones([2, 8, 8, 1]), 4, [3, 3],
                    weights_regularizer=slim.l2_regularizer(0.0))
  net = slim.batch_norm(net, fused=False, is_training=True)
  loss = tf.reduce_mean(slim.fully_connected(slim.flatten(net), 3))
  train_op = tf.group(tf.train.RMSPropOptimizer(0.1).minimize(loss),
                      tf.train.AdagradOptimizer(0.1).minimize(loss))
  tf.initializers.random_uniform(dtype=tf.float32)  # deprecated, user code
  with tf.Session() as sess:
    sess.run(tf.global_variables_initializer())
    sess.run(train_op)
tf.logging.info('a line of the project')
warnings.warn('a warning of the user')
print('GPUs found: %d' % len(tf.config.list_physical_devices('GPU')))
print('tf.keras from', tf.keras.layers.Dense.__module__.split('.')[0])
'''

# What a run printed before tf2_compat.quiet (TensorFlow's C++ INFO lines go
# by the default TF_CPP_MIN_LOG_LEVEL=2).
CUDA_NOISE = [
    'absl::InitializeLog() is called',
    'cudart_stub.cc',
    'Could not find cuda drivers',
    'failed call to cuInit',
]
LIBRARY_NOISE = [
    '`layer.apply` is deprecated',
    '`tf.layers.flatten` is deprecated',
    '_colocate_with (from tensorflow.python.framework.ops) is deprecated',
    'rmsprop.py',
    'adagrad.py',
    'Scale of 0 disables regularizer.',
    'cpu_feature_guard.cc',
    'mlir_graph_optimization_pass.cc',
]


def _run_python(args, tf_cpp_min_log_level=None, timeout=180, env=None):
  given = env or {}
  env = dict(os.environ, PYTHONPATH=REPO)
  env.pop('TF_CONFIG', None)
  env.pop('PYTHONWARNINGS', None)
  env.pop('TF_USE_LEGACY_KERAS', None)
  # conftest sets the variable for the tests; here the user's shell decides.
  env.pop('TF_CPP_MIN_LOG_LEVEL', None)
  env.update(given)
  if tf_cpp_min_log_level is not None:
    env['TF_CPP_MIN_LOG_LEVEL'] = tf_cpp_min_log_level
  return subprocess.run([sys.executable] + args, cwd=REPO, env=env,
                        stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                        text=True, timeout=timeout, check=False)


@pytest.mark.slow
def test_only_the_lines_of_the_project_and_the_user_are_printed():
  result = _run_python(['-c', PROGRAM])
  assert result.returncode == 0, result.stdout
  gpus = int(re.search(r'^GPUs found: (\d+)$', result.stdout, re.M).group(1))
  assert result.stdout.splitlines() == [
      'WARNING:tensorflow:From <string>:12: calling RandomUniform.__init__ '
      '(from tensorflow.python.ops.init_ops) with dtype is deprecated and '
      'will be removed in a future version.',
      'Instructions for updating:',
      'Call initializer instance with the dtype argument instead of passing '
      'it to the constructor',
      'INFO:tensorflow:a line of the project',
      '<string>:17: UserWarning: a warning of the user',
      'GPUs found: %d' % gpus,
      # Keras 2 unless the user chose (test_tf_keras_is_keras_2_...).
      'tf.keras from tf_keras',
  ]


KERAS_PROGRAM = '''
from tf2_compat.slim_compat import tf
print('tf.keras from', tf.keras.layers.Dense.__module__.split('.')[0])
'''


# Without the user's choice, tf.keras is tf_keras: PROGRAM's last line,
# checked by test_only_the_lines_of_the_project_and_the_user_are_printed.
@pytest.mark.slow
@pytest.mark.parametrize('choice,package', [('0', 'keras')])
def test_tf_keras_is_keras_2_unless_the_user_chose(choice, package):
  env = {'TF_USE_LEGACY_KERAS': choice}
  result = _run_python(['-c', KERAS_PROGRAM], env=env)
  assert result.returncode == 0, result.stdout
  assert result.stdout.splitlines()[-1] == 'tf.keras from %s' % package


@pytest.mark.slow
def test_tf_cpp_min_log_level_0_shows_everything_again():
  result = _run_python(['-c', PROGRAM], tf_cpp_min_log_level='0')
  assert result.returncode == 0, result.stdout
  expected = list(LIBRARY_NOISE)
  if 'GPUs found: 0' in result.stdout:  # The CUDA lines need a GPU-less box.
    expected += CUDA_NOISE
  missing = [line for line in expected if line not in result.stdout]
  assert not missing, result.stdout
  assert 'a warning of the user' in result.stdout


def _stderr_through_filter(*chunks):
  """Writes chunks to descriptor 2 inside native_stderr_filtered, then dies.

  The process aborts inside the block, as TensorFlow does when a CPU check
  fails while it loads: what it wrote must still come out.
  """
  program = (
      'import os\n'
      'from tf2_compat import quiet\n'
      'with quiet.native_stderr_filtered() as filtered:\n'
      '  assert filtered\n'
      '  for chunk in %r:\n'
      '    os.write(2, chunk)\n'
      '  os.abort()\n' % (chunks,))
  result = _run_python(['-c', program], tf_cpp_min_log_level='2', timeout=60)
  assert result.returncode == -6  # SIGABRT
  return result.stdout


def test_native_filter_drops_exactly_the_cuda_stub_lines():
  stub = (b'I0000 00:00:1795408715.337965    3685 cudart_stub.cc:31] Could '
          b'not find cuda drivers on your machine, GPU will not be used.\n')
  absl = (b'WARNING: All log messages before absl::InitializeLog() is called '
          b'are written to STDERR\n')
  no_driver = (b'E0000 00:00:1795408718.766978    3685 cuda_platform.cc:52] '
               b'failed call to cuInit: INTERNAL: CUDA error: Failed call to '
               b'cuInit: UNKNOWN ERROR (303)\n')
  # A driver that is there but finds no device: the user needs this one.
  no_device = (b'E0000 00:00:1795408718.766978    3685 cuda_platform.cc:52] '
               b'failed call to cuInit: INTERNAL: CUDA error: Failed call to '
               b'cuInit: CUDA_ERROR_NO_DEVICE: no CUDA-capable device is '
               b'detected (100)\n')
  fatal = (b'F0000 00:00:1795408715.386716    3685 cpu_feature_guard.cc:1] '
           b'The TensorFlow library was compiled to use AVX instructions\n')
  output = _stderr_through_filter(absl, stub, no_driver, no_device,
                                  absl, stub[:40], stub[40:], fatal,
                                  b'last words, no newline')
  assert output == (no_device + fatal).decode() + 'last words, no newline'


def test_native_filter_drops_the_onednn_notice_of_avx512_cpus():
  notice = (b'I0000 00:00:1795518646.306731    3426 port.cc:153] oneDNN custom '
            b'operations are on. You may see slightly different numerical '
            b'results due to floating-point round-off errors from different '
            b'computation orders. To turn them off, set the environment '
            b'variable `TF_ENABLE_ONEDNN_OPTS=0`.\n')
  # Another port.cc line is not the notice.
  other = (b'I0000 00:00:1795518646.306731    3426 port.cc:153] oneDNN custom '
           b'operations are off.\n')
  output = _stderr_through_filter(notice, other, notice, b'kept\n')
  assert output == (other + b'kept\n').decode()


# The image check that training and eval run on every image, after the
# import: where oneDNN is on, an int64 op of the kinds it has kernels for
# (a Transpose, before) has TensorFlow print a notice about oneDNN's int64
# support once per process.
IMAGE_CHECK_PROGRAM = '''
from tf2_compat import quiet
quiet.import_tensorflow()
import numpy as np
import tensorflow as tf
from datasets import image_check
with tf.Graph().as_default() as graph:
  png = tf.image.encode_png(np.zeros([3, 5, 1], np.uint8))
  size = image_check.header_size(png)
with tf.compat.v1.Session(graph=graph) as session:
  print('size', session.run(size))
'''


def test_the_image_check_makes_no_onednn_notice():
  # TF_ENABLE_ONEDNN_OPTS=1, as oneDNN is by default on CPUs with AVX-512.
  result = _run_python(['-c', IMAGE_CHECK_PROGRAM], timeout=60,
                       env={'TF_ENABLE_ONEDNN_OPTS': '1'})
  assert result.returncode == 0, result.stdout
  assert result.stdout == 'size [3 5]\n'


def test_native_filter_is_off_when_the_user_asks_for_everything(monkeypatch):
  monkeypatch.setenv('TF_CPP_MIN_LOG_LEVEL', '0')
  with quiet.native_stderr_filtered() as filtered:
    assert not filtered


def _warn_as(message, module):
  warnings.warn_explicit(message, UserWarning, module.replace('.', '/') + '.py',
                         1, module=module)


def _shown_warnings(monkeypatch, warnoptions, tf_cpp_min_log_level='2'):
  monkeypatch.setattr(sys, 'warnoptions', warnoptions)
  monkeypatch.setenv('TF_CPP_MIN_LOG_LEVEL', tf_cpp_min_log_level)
  with warnings.catch_warnings(record=True) as shown:
    warnings.simplefilter('always')
    quiet.filter_library_messages()
    _warn_as('`layer.apply` is deprecated and will be removed in a future '
             'version. Please use `layer.__call__` method instead.',
             'tensorflow.python.keras.engine.base_layer_v1')
    _warn_as('`tf.layers.flatten` is deprecated and will be removed in a '
             'future version. Please use `tf.keras.layers.Flatten` instead.',
             'tensorflow.python.keras.legacy_tf_layers.core')
    # Same text from another module, and another text from the same module.
    _warn_as('`layer.apply` is deprecated', 'my_project.layers')
    _warn_as('`layer.add_variable` is deprecated',
             'tensorflow.python.keras.engine.base_layer_v1')
  return [(str(w.message).split(' is ')[0], w.filename) for w in shown]


def test_library_warnings_are_dropped_by_message_and_module(monkeypatch):
  assert _shown_warnings(monkeypatch, []) == [
      ('`layer.apply`', 'my_project/layers.py'),
      ('`layer.add_variable`',
       'tensorflow/python/keras/engine/base_layer_v1.py'),
  ]


@pytest.mark.parametrize('warnoptions, level', [(['default'], '2'),
                                                ([], '0')])
def test_warning_options_of_the_user_show_library_warnings(
    monkeypatch, warnoptions, level):
  assert len(_shown_warnings(monkeypatch, warnoptions, level)) == 4


def _deprecation_record(call_site):
  return logging.LogRecord(
      'tensorflow', logging.WARNING, 'deprecation.py', 1,
      'From %s: %s (from %s) is deprecated and will be removed %s.\n'
      'Instructions for updating:\n%s',
      (call_site, 'f', 'm', 'in a future version', 'do not'), None)


def _library_file(package, *parts):
  module = __import__(package)
  return os.path.join(os.path.dirname(module.__file__), *parts)


@pytest.mark.parametrize('package, parts', [
    ('tensorflow', ('python', 'training', 'rmsprop.py')),
    ('tf_keras', ('src', 'layers', 'normalization',
                  'batch_normalization.py')),
    ('tf_slim', ('layers', 'layers.py')),
])
def test_deprecation_called_from_library_code_is_dropped(package, parts):
  log_filter = quiet.LibraryLogFilter()
  call_site = _library_file(package, *parts) + ':188'
  assert not log_filter.filter(_deprecation_record(call_site))


@pytest.mark.parametrize('call_site', [
    os.path.join(REPO, 'train_image_classifier.py') + ':120',
    '<string>:3',
    # A neighbour whose name starts like a library's.
    _library_file('tensorflow') + '_addons/x.py:1',
])
def test_deprecation_called_from_other_code_is_kept(call_site):
  log_filter = quiet.LibraryLogFilter()
  assert log_filter.filter(_deprecation_record(call_site))


def _info_record(pathname, message, *args):
  return logging.LogRecord('tensorflow', logging.INFO, pathname, 1, message,
                           args, None)


# What TensorFlow's session machinery and tf-slim log at INFO, and where.
LIBRARY_INFO = [
    (('tensorflow', 'python', 'training', 'basic_session_run_hooks.py'),
     'Create CheckpointSaverHook.', ()),
    (('tensorflow', 'python', 'training', 'monitored_session.py'),
     'Graph was finalized.', ()),
    (('tensorflow', 'python', 'training', 'session_manager.py'),
     'Running local_init_op.', ()),
    (('tensorflow', 'python', 'training', 'session_manager.py'),
     'Done running local_init_op.', ()),
    (('tensorflow', 'python', 'training', 'basic_session_run_hooks.py'),
     'Calling checkpoint listeners before saving checkpoint %d...', (40,)),
    (('tensorflow', 'python', 'training', 'basic_session_run_hooks.py'),
     'Calling checkpoint listeners after saving checkpoint %d...', (40,)),
    (('tf_slim', 'layers', 'regularizers.py'),
     'Scale of 0 disables regularizer.', ()),
]


@pytest.mark.parametrize('where, message, args', LIBRARY_INFO)
def test_library_info_lines_are_dropped(where, message, args):
  record = _info_record(_library_file(*where), message, *args)
  assert not quiet.LibraryLogFilter().filter(record)


@pytest.mark.parametrize('where, message, args', LIBRARY_INFO)
def test_the_same_info_lines_from_the_project_are_kept(where, message, args):
  del where
  record = _info_record(os.path.join(REPO, 'train_image_classifier.py'),
                        message, *args)
  assert quiet.LibraryLogFilter().filter(record)


@pytest.mark.parametrize('where, message, args', [
    (('tensorflow', 'python', 'training', 'basic_session_run_hooks.py'),
     'Saving checkpoints for %d into %s.', (40, '/tmp/train/model.ckpt')),
    (('tensorflow', 'python', 'training', 'saver.py'),
     'Restoring parameters from %s', ('/tmp/train/model.ckpt-40',)),
])
def test_info_lines_about_the_model_are_kept(where, message, args):
  record = _info_record(_library_file(*where), message, *args)
  assert quiet.LibraryLogFilter().filter(record)


def test_library_log_filter_is_installed_once(monkeypatch):
  monkeypatch.setenv('TF_CPP_MIN_LOG_LEVEL', '2')
  quiet.filter_library_messages()
  quiet.filter_library_messages()
  installed = [f for f in logging.getLogger('tensorflow').filters
               if isinstance(f, quiet.LibraryLogFilter)]
  assert len(installed) == 1


def test_deprecation_silenced_keeps_only_the_block_quiet(caplog):
  from tensorflow.python.util import deprecation  # pylint: disable=g-import-not-at-top

  def old_call():
    return 1

  inside = deprecation.deprecated(None, 'Use new_call.')(old_call)
  outside = deprecation.deprecated(None, 'Use new_call.')(lambda: 2)
  with caplog.at_level(logging.WARNING, logger='tensorflow'):
    with quiet.deprecation_silenced():
      assert inside() == 1
    assert outside() == 2
  notices = [record.getMessage() for record in caplog.records
             if 'is deprecated' in record.getMessage()]
  assert len(notices) == 1 and '<lambda>' in notices[0], notices
