"""python -m tf2_compat.run_slim SCRIPT: an existing Slim program, unchanged."""

import os
import re
import subprocess
import sys
import textwrap

import pytest

from tf2_compat import contrib_stubs
from tf2_compat import run_slim
from tf2_compat.slim_compat import tf
from tests.script_runner import REPO, run_script, script_env

TF1_PROGRAM = os.path.join(REPO, 'tests', 'tf1_program')


def _run_slim(*args, cwd=REPO, timeout=180, pythonpath=None):
  env = script_env()
  if pythonpath:
    env['PYTHONPATH'] += os.pathsep + str(pythonpath)
  return subprocess.run(
      [sys.executable, '-m', 'tf2_compat.run_slim'] + [str(a) for a in args],
      cwd=cwd, env=env, stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True, timeout=timeout, check=False)


def _script(tmp_path, source, name='program.py'):
  path = tmp_path / name
  path.write_text(textwrap.dedent(source))
  return path


# Bad input: one line, no traceback from the runner.


def test_a_missing_script_is_one_line_and_status_2(tmp_path):
  missing = tmp_path / 'train_image_classifier.py'
  result = _run_slim(missing, '--batch_size=32')
  assert result.returncode == 2
  assert result.stderr == 'error: no such script: %s\n' % missing
  assert result.stdout == ''


def test_a_syntax_error_is_one_line_naming_file_and_line(tmp_path):
  path = _script(tmp_path, '''\
      import tensorflow.compat.v1 as tf
      def main(:
        pass
      ''')
  result = _run_slim(path)
  assert result.returncode == 2
  assert result.stderr.startswith('error: %s:2: SyntaxError: ' % path)
  assert result.stderr.count('\n') == 1
  assert 'Traceback' not in result.stderr


def test_a_directory_is_refused(tmp_path):
  result = _run_slim(tmp_path)
  assert result.returncode == 2
  assert result.stderr == 'error: %s is not a Python file\n' % tmp_path


def test_no_script_prints_the_usage():
  result = _run_slim()
  assert result.returncode == 2
  assert result.stderr == 'error: no script given; %s\n' % run_slim.USAGE


def test_an_unknown_runner_option_is_one_line(tmp_path):
  result = _run_slim('--eager=off', tmp_path / 'train.py')
  assert result.returncode == 2
  assert result.stderr == 'error: unknown option --eager=off; %s\n' % (
      run_slim.USAGE)


def test_help_prints_the_usage():
  result = _run_slim('--help')
  assert (result.returncode, result.stdout) == (0, run_slim.USAGE + '\n')


def test_a_removed_contrib_call_is_one_line_with_the_call_site(tmp_path):
  path = _script(tmp_path, '''\
      import tensorflow.compat.v1 as tf
      from tensorflow.contrib import quantize as contrib_quantize

      def main(_):
        with tf.Graph().as_default():
          contrib_quantize.create_training_graph(quant_delay=0)

      if __name__ == '__main__':
        tf.app.run()
      ''')
  result = _run_slim(path)
  assert result.returncode == 1
  lines = result.stderr.splitlines()
  assert lines == [
      'error: %s:6: tensorflow.contrib.quantize.create_training_graph() was '
      'removed in TF 2.x; %s' % (path, contrib_stubs.MODULE_ADVICE[
          'quantize'])]


def test_another_exception_shows_only_the_scripts_frames(tmp_path):
  path = _script(tmp_path, '''\
      def load(name):
        raise KeyError(name)

      load('flowers')
      ''')
  result = _run_slim(path)
  assert result.returncode == 1
  assert result.stderr.splitlines() == [
      'Traceback (most recent call last):',
      '  File "%s", line 4, in <module>' % path,
      "    load('flowers')",
      '  File "%s", line 2, in load' % path,
      '    raise KeyError(name)',
      "KeyError: 'flowers'",
  ]


# Running as `python SCRIPT args` would.


def test_the_script_runs_as_main_with_its_args_and_folder(tmp_path):
  (tmp_path / 'helper_module.py').write_text('VALUE = 42\n')
  path = _script(tmp_path, '''\
      import sys
      import helper_module            # from the script's folder
      from deployment import model_deploy  # from this project
      print(__name__, __file__, sys.argv[1:], helper_module.VALUE)
      ''')
  result = _run_slim(path, '--train_dir=/tmp/x', 'positional', cwd=tmp_path)
  assert result.returncode == 0, result.stderr
  assert result.stdout == "__main__ %s ['--train_dir=/tmp/x', 'positional'] 42\n" % path


def test_the_scripts_exit_status_is_the_runners(tmp_path):
  path = _script(tmp_path, 'import sys\nsys.exit(7)\n')
  assert _run_slim(path).returncode == 7


def test_the_script_gets_the_compat_layer_and_the_contrib_stubs(tmp_path):
  path = _script(tmp_path, '''\
      import tensorflow.compat.v1 as tf
      import tf_slim as slim
      from tensorflow.contrib import framework as contrib_framework
      from tensorflow.contrib import slim as contrib_slim
      from tensorflow.contrib import training as contrib_training
      from tf2_compat import slim_loops
      assert contrib_slim is slim
      assert contrib_framework.arg_scope is slim.arg_scope
      assert contrib_training.create_train_op is slim.training.create_train_op
      assert slim_loops.installed()
      assert tf.executing_eagerly()   # Nothing switched eager execution off.
      print('ok')
      ''')
  result = _run_slim(path)
  assert (result.returncode, result.stdout) == (0, 'ok\n'), result.stderr


def test_an_upstream_style_training_loop_runs_unchanged(tmp_path):
  # The shape of a TF1 Slim program: contrib imports, tf.app.run, a graph
  # built in main, slim.learning.train with the Supervisor's threads.
  path = _script(tmp_path, '''\
      import numpy as np
      import tensorflow.compat.v1 as tf
      from tensorflow.contrib import quantize as contrib_quantize
      from tensorflow.contrib import slim

      tf.app.flags.DEFINE_string('train_dir', None, 'Where to write.')
      tf.app.flags.DEFINE_integer('quantize_delay', -1, 'Unused here.')
      FLAGS = tf.app.flags.FLAGS

      def main(_):
        with tf.Graph().as_default():
          x = tf.constant(np.eye(4, dtype=np.float32))
          logits = slim.fully_connected(x, 4, activation_fn=None)
          tf.losses.softmax_cross_entropy(tf.eye(4), logits)
          total_loss = tf.losses.get_total_loss()
          tf.summary.scalar('total_loss', total_loss)
          if FLAGS.quantize_delay >= 0:
            contrib_quantize.create_training_graph(
                quant_delay=FLAGS.quantize_delay)
          train_op = slim.learning.create_train_op(
              total_loss, tf.train.GradientDescentOptimizer(1.0))
          loss = slim.learning.train(
              train_op, FLAGS.train_dir, number_of_steps=50,
              save_summaries_secs=1, save_interval_secs=1)
          print('final loss %.3f' % loss)

      if __name__ == '__main__':
        tf.app.run()
      ''')
  result = _run_slim(path, '--train_dir=%s' % (tmp_path / 'train'))
  assert result.returncode == 0, result.stderr
  loss = float(result.stdout.split('final loss ')[1])
  assert loss < 0.1
  assert os.path.exists(tmp_path / 'train' / 'model.ckpt-50.index')


def test_disable_eager_execution_runs_a_global_graph_script(tmp_path):
  # A TF 1.x script with no `with tf.Graph().as_default()`: it builds in the
  # global default graph, which needs graph mode for the whole process.
  path = _script(tmp_path, '''\
      import sys
      import tensorflow.compat.v1 as tf
      import tf_slim as slim
      weights = tf.Variable(1.0)
      loss = tf.square(weights)
      train_op = slim.learning.create_train_op(
          loss, tf.train.GradientDescentOptimizer(0.25))
      slim.learning.train(train_op, sys.argv[1], number_of_steps=4,
                          save_summaries_secs=1, save_interval_secs=1)
      print(tf.executing_eagerly(), tf.train.load_variable(
          sys.argv[1] + '/model.ckpt-4', 'Variable'))
      ''')
  # The checkpoint of the last step by name: once, on a busy machine, the
  # Supervisor's timed save of step 0 ended after the final save and became
  # the latest (a race inside tf-slim's Supervisor, not run_slim's).
  result = _run_slim('--disable_eager_execution', path, tmp_path / 'train')
  assert result.returncode == 0, result.stderr
  # w <- w - 0.25 * 2w = w / 2, four times.
  assert result.stdout == 'False 0.0625\n'


# Unit level.


@pytest.mark.parametrize('source, expected', [
    ('x = (1,\n', ':1: SyntaxError: '),
    ('if True:\npass\n', ':2: IndentationError: '),
    ('x = 1\0\n', ': '),  # SyntaxError or ValueError, by Python version
])
def test_compile_script_reports_the_file_and_line(tmp_path, source, expected):
  path = tmp_path / 'bad.py'
  path.write_text(source)
  with pytest.raises(run_slim.ScriptError) as raised:
    run_slim.compile_script(str(path))
  assert str(raised.value).startswith(str(path) + expected)
  assert 'None' not in str(raised.value)


# --tf1: a TF 1.x program, unchanged.


@pytest.mark.slow
def test_tf1_trains_an_unchanged_tf1_program_to_95_percent(digits_dir,
                                                           tmp_path):
  # tests/tf1_program: `import tensorflow as tf`, tf.contrib.slim, its own
  # `nets` from PYTHONPATH (after this project's root), 2 CPU clones.
  models = os.path.join(TF1_PROGRAM, 'models')
  train_dir = str(tmp_path / 'train')
  # Its own flag, below its default of 300 steps: test accuracy 0.9667 and
  # 0.9806 after 200 steps, 0.9667 and 0.9583 after 150
  # (TF_ENABLE_ONEDNN_OPTS=0, then 1).
  steps = 200
  train = _run_slim('--tf1', os.path.join(TF1_PROGRAM, 'train_digits.py'),
                    '--dataset_dir=' + digits_dir, '--train_dir=' + train_dir,
                    '--max_number_of_steps=%d' % steps, pythonpath=models)
  assert train.returncode == 0, train.stderr[-3000:]
  assert 'Recording summary at step' in train.stderr
  assert 'closed FileWriter' not in train.stderr
  assert tf.train.latest_checkpoint(train_dir).endswith(
      'model.ckpt-%d' % steps)
  evaluation = _run_slim(
      '--tf1', os.path.join(TF1_PROGRAM, 'eval_digits.py'),
      '--dataset_dir=' + digits_dir, '--checkpoint_dir=' + train_dir,
      pythonpath=models)
  assert evaluation.returncode == 0, evaluation.stderr[-3000:]
  accuracy = float(re.search(r'^accuracy: ([\d.]+) on 360 test digits$',
                             evaluation.stdout, re.M).group(1))
  print('test accuracy: %.4f' % accuracy)  # Shown by pytest -rP.
  assert accuracy >= 0.95


# What `import tensorflow` gives in the script, and in library modules.
TF1_PROBE = """\
import sys
import tensorflow as tf
import tf_slim

def imported_in(module_name):
  namespace = dict(vars(sys.modules[module_name]))
  exec('import tensorflow as imported', namespace)
  return namespace['imported']

print('script', tf is sys.modules['tensorflow'], tf.app is tf.compat.v1.app)
for name in ('tensorflow.python.ops.nn_ops', 'tf_slim.layers.layers',
             'tf_keras.src.legacy_tf_layers.core', 'deployment.model_deploy',
             'tf2_compat.slim_compat'):
  __import__(name)
  print(name, imported_in(name) is sys.modules['tensorflow'])
print('eager', tf.executing_eagerly())
print('dimension', tf.zeros([2, 3]).get_shape()[1].value)
# A layer's variables made in a tf.cond branch, as TF 1.x programs' dropout
# and batch norm often are.
is_training = tf.placeholder(tf.bool, [])
dense = lambda: tf.contrib.slim.fully_connected(tf.ones([2, 4]), 3,
                                                scope='in_branch')
outputs = tf.cond(is_training, dense, lambda: tf.zeros([2, 3]))
with tf.Session() as session:
  session.run(tf.global_variables_initializer())
  print('cond', session.run(outputs, {is_training: True}).shape,
        [v.op.name for v in tf.global_variables()])
"""


@pytest.fixture(scope='module')
def tf1_probe(tmp_path_factory):
  path = tmp_path_factory.mktemp('probe') / 'probe.py'
  path.write_text(TF1_PROBE)
  result = _run_slim('--tf1', path)
  assert result.returncode == 0, result.stderr
  return result.stdout.splitlines()


def test_tf1_gives_the_script_tf1s_tensorflow(tf1_probe):
  assert tf1_probe[0] == 'script False True'


def test_tf1_leaves_libraries_and_this_project_the_real_tensorflow(tf1_probe):
  assert tf1_probe[1:6] == [
      'tensorflow.python.ops.nn_ops True', 'tf_slim.layers.layers True',
      'tf_keras.src.legacy_tf_layers.core True',
      'deployment.model_deploy True', 'tf2_compat.slim_compat True']


def test_tf1_switches_the_process_to_graph_mode(tf1_probe):
  assert tf1_probe[6] == 'eager False'


def test_tf1_shapes_have_tf1_dimensions(tf1_probe):
  assert tf1_probe[7] == 'dimension 3'   # shape[1].value, a TF 1.x idiom


# It failed under --tf1 alone ("Attempting to capture an EagerTensor
# without building a function"): the quiet import had set up the eager
# context's devices before the runner turned eager execution off.
def test_tf1_builds_variables_in_a_cond_branch(tf1_probe):
  assert tf1_probe[8] == (
      "cond (2, 3) ['in_branch/weights', 'in_branch/biases']")


def test_tf1_with_a_missing_script_is_one_line_and_status_2(tmp_path):
  missing = tmp_path / 'train.py'
  result = _run_slim('--tf1', missing)
  assert (result.returncode, result.stderr) == (
      2, 'error: no such script: %s\n' % missing)


def test_tf1_with_a_syntax_error_is_one_line_and_status_2(tmp_path):
  path = _script(tmp_path, 'import tensorflow as tf\nslim = tf.contrib.slim(\n')
  result = _run_slim('--tf1', path)
  assert result.returncode == 2
  assert re.match(r'error: %s:2: SyntaxError: [^\n]+\n$' % re.escape(
      str(path)), result.stderr)


def test_tf1_a_removed_call_is_one_line_with_the_programs_call_site(
    tmp_path):
  # In a module of the program's, imported from PYTHONPATH: the line named
  # is the call there.
  (tmp_path / 'lib').mkdir()
  (tmp_path / 'lib' / 'quantized.py').write_text(textwrap.dedent('''\
      import tensorflow as tf

      def rewrite_graph():
        tf.contrib.quantize.create_training_graph(quant_delay=0)
      '''))
  path = _script(tmp_path, '''\
      import quantized
      quantized.rewrite_graph()
      ''')
  result = _run_slim('--tf1', path, pythonpath=tmp_path / 'lib')
  assert result.returncode == 1
  assert result.stderr == (
      'error: %s:4: tensorflow.contrib.quantize.create_training_graph() was '
      'removed in TF 2.x; %s\n' % (tmp_path / 'lib' / 'quantized.py',
                                    contrib_stubs.MODULE_ADVICE['quantize']))


# In a dataset.map function, which TensorFlow traces: autograph raises its
# own error of 20 lines and more for the one raised there.
TRACED_PROGRAM = """\
import tensorflow as tf

def parse(record):
  return %s

dataset = tf.data.Dataset.range(3).map(parse)
print('mapped')
"""


@pytest.mark.parametrize('runner_options, use, status, message', [
    (['--tf1'], 'tf.contrib.image.rotate(record, 1.0)', 1,
     'tensorflow.contrib.image.rotate() was removed in TF 2.x; '
     'TensorFlow Addons had it as tfa.image.rotate (Addons is no longer '
     'maintained)'),
    (['--tf1'], 'isinstance(record, tf.contrib.rnn.LSTMBlockCell)', 2,
     'tensorflow.contrib.rnn.LSTMBlockCell was removed in TF 2.x, so it '
     'cannot be given to isinstance(); use tf.compat.v1.nn.rnn_cell, or '
     'tf.keras.layers (LSTM, GRU, RNN)'),
    ([], 'tf.image.resize_bilinear(record, [2, 2])', 2,
     'tf.image.resize_bilinear is TF 1.x API, which TF 2.21 does not have; '
     'run the program with --tf1: python -m tf2_compat.run_slim --tf1 '
     '{path}'),
], ids=['removed_call', 'removed_value', 'tf1_name'])
def test_an_error_in_a_traced_function_is_one_line_with_its_call_site(
    tmp_path, runner_options, use, status, message):
  path = tmp_path / 'program.py'
  path.write_text(TRACED_PROGRAM % use)
  result = run_script(os.path.join('tf2_compat', 'run_slim.py'),
                      *runner_options, str(path))
  assert result.returncode == status, result.stdout
  assert result.stdout == 'error: %s:4: %s\n' % (
      path, message.format(path=path))


def test_a_tf1_name_without_tf1_is_one_line_saying_to_add_it(tmp_path):
  path = _script(tmp_path, '''\
      import tensorflow as tf
      flags = tf.app.flags
      ''')
  result = _run_slim(path, '--train_dir=/tmp/x')
  assert result.returncode == 2
  assert result.stderr == (
      'error: %s:2: tf.app is TF 1.x API, which TF 2.21 does not have; run '
      'the program with --tf1: python -m tf2_compat.run_slim --tf1 %s '
      '--train_dir=/tmp/x\n' % (path, path))


@pytest.mark.parametrize('expression, name', [
    ('tensorflow.app', 'tf.app'),
    ('tensorflow.summary.merge', 'tf.summary.merge'),
    ('tensorflow.image.resize_bilinear', 'tf.image.resize_bilinear'),
    ('tensorflow.no_such_name', None),     # Not TF 1.x's either.
    ('os.no_such_name', None),             # Not TensorFlow's.
])
def test_tf1_name_tells_a_tf1_name_from_other_errors(expression, name):
  module_name, attribute = expression.rsplit('.', 1)
  module = {'tensorflow': sys.modules['tensorflow'], 'os': os}[
      module_name.split('.')[0]]
  for part in module_name.split('.')[1:]:
    module = getattr(module, part)
  with pytest.raises(AttributeError) as raised:
    getattr(module, attribute)
  assert run_slim.tf1_name(raised.value) == name
