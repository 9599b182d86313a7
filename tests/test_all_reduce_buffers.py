"""benchmarks/all_reduce_buffers.py's parts that need no root: its flags,
the collectives per buffer size and its table."""

import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, 'benchmarks'))

# pylint: disable=g-import-not-at-top,wrong-import-position
import all_reduce_buffers
from tests.test_benchmarks import header
from tests.test_benchmarks import table_rows
# pylint: enable=g-import-not-at-top,wrong-import-position


def test_lenet_floats_are_the_variables_of_nets_lenet():
  # pylint: disable=g-import-not-at-top
  from nets import nets_factory
  from tf2_compat.slim_compat import tf
  with tf.Graph().as_default():
    nets_factory.get_network_fn('lenet', 10)(tf.zeros([1, 28, 28, 1]))
    floats = sum(v.shape.num_elements() for v in tf.global_variables())
  assert floats == all_reduce_buffers.LENET_FLOATS == 3274634


@pytest.mark.parametrize('buffer_mib,count', [
    (32, 1), (8, 2), (4, 4), (2, 7), (1, 13)])
def test_collectives_per_all_reduce_follow_the_float32_bytes(buffer_mib,
                                                             count):
  assert all_reduce_buffers.buffer_count(buffer_mib) == count


@pytest.mark.parametrize('argv', [
    ['--buffer_mib=4,x'], ['--buffer_mib=0'], ['--wire_dtypes=int8'],
    ['--steps=1'], ['--rounds=0']])
def test_bad_flags_are_refused(argv):
  with pytest.raises(SystemExit):
    all_reduce_buffers.parse_args(argv)


def test_the_table_gives_the_time_against_the_link():
  args = all_reduce_buffers.parse_args(['--buffer_mib=32,4',
                                        '--wire_dtypes=float32'])
  assert (args.buffers, args.dtypes) == ([32.0, 4.0], ['float32'])
  measured = {('float32', 32.0): [(0.160, 12.5, 12.5), (0.150, 12.5, 12.5)],
              ('float32', 4.0): [(0.126, 12.5, 12.4)]}
  lines = all_reduce_buffers.table(args, measured)
  assert header(lines, 'wire dtype')[3] == 's per all-reduce'
  # 12.5 MiB at 1 Gbit/s: 0.105 s; 0.155 / 0.105 and 0.126 / 0.105.
  assert table_rows(lines, 'wire dtype') == [
      ['float32', '32', '1', '0.155', '12.5 / 12.5', '0.105', '1.48x',
       '0.160, 0.150'],
      ['float32', '4', '4', '0.126', '12.5 / 12.4', '0.105', '1.20x',
       '0.126']]
