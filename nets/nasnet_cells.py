"""The cells of NASNet-A and PNASNet-5, as tables, and how a cell is built.

"Learning Transferable Architectures for Scalable Image Recognition", Zoph
et al., 2018 (https://arxiv.org/abs/1707.07012), Figure 4: the normal and
reduction cells of NASNet-A. "Progressive Neural Architecture Search", Liu
et al., 2018 (https://arxiv.org/abs/1712.00559), Figure 1: the cell of
PNASNet-5, used at stride 1 and 2 alike.

A cell reads two hidden states: 0, the output of the cell before it (through
a 1x1 convolution to the cell's width), and 1, the output of the cell two
back (matched to the cell's size and width). Each of its five combinations
applies one operation to each of two hidden states and adds the results,
which become hidden state 2, 3, ... The cell's output concatenates the
hidden states its table does not leave out.

Variable names are those of the published Slim checkpoints, e.g.
`cell_3/comb_iter_0/left/separable_5x5_1/depthwise_weights`,
`cell_3/comb_iter_2/left/1x1/weights` (a pooling changing the width),
`cell_3/prev_1x1/weights`, `reduction_cell_0/1x1/weights`,
`cell_stem_0/comb_iter_0/left/bn_sep_5x5_2/beta`.
"""

import collections
import dataclasses

from tf2_compat.slim_compat import slim, tf

# kind: 'separable' (`layers` times ReLU, separable convolution, batch norm),
# 'avg_pool', 'max_pool' (SAME padding), or 'identity'; size: the kernel
# side.
Operation = collections.namedtuple('Operation', ['kind', 'size', 'layers'])

SEPARABLE_3X3 = Operation('separable', 3, 2)
SEPARABLE_5X5 = Operation('separable', 5, 2)
SEPARABLE_7X7 = Operation('separable', 7, 2)
AVG_POOL_3X3 = Operation('avg_pool', 3, 0)
MAX_POOL_3X3 = Operation('max_pool', 3, 0)
IDENTITY = Operation('identity', 1, 0)

# Hidden state `left_input` through `left`, plus `right_input` through
# `right`; built as the scope comb_iter_<i>/{left,right}.
Combination = collections.namedtuple(
    'Combination', ['left', 'left_input', 'right', 'right_input'])

# combinations: the five Combinations in order; left_out: the hidden states
# the output does not concatenate.
CellStructure = collections.namedtuple('CellStructure',
                                       ['combinations', 'left_out'])

NASNET_A_NORMAL = CellStructure(
    combinations=(
        Combination(SEPARABLE_5X5, 0, SEPARABLE_3X3, 1),
        Combination(SEPARABLE_5X5, 1, SEPARABLE_3X3, 1),
        Combination(AVG_POOL_3X3, 0, IDENTITY, 1),
        Combination(AVG_POOL_3X3, 1, AVG_POOL_3X3, 1),
        Combination(SEPARABLE_3X3, 0, IDENTITY, 0),
    ),
    left_out=(0,))

NASNET_A_REDUCTION = CellStructure(
    combinations=(
        Combination(SEPARABLE_5X5, 0, SEPARABLE_7X7, 1),
        Combination(MAX_POOL_3X3, 0, SEPARABLE_7X7, 1),
        Combination(AVG_POOL_3X3, 0, SEPARABLE_5X5, 1),
        Combination(IDENTITY, 3, AVG_POOL_3X3, 2),
        Combination(SEPARABLE_3X3, 2, MAX_POOL_3X3, 0),
    ),
    left_out=(0, 1, 2))

PNASNET_5 = CellStructure(
    combinations=(
        Combination(SEPARABLE_5X5, 1, MAX_POOL_3X3, 1),
        Combination(SEPARABLE_7X7, 0, MAX_POOL_3X3, 0),
        Combination(SEPARABLE_5X5, 0, SEPARABLE_3X3, 0),
        Combination(SEPARABLE_3X3, 4, MAX_POOL_3X3, 0),
        Combination(SEPARABLE_3X3, 1, IDENTITY, 0),
    ),
    left_out=(0, 1))


@dataclasses.dataclass(frozen=True)
class DropPath:
  """Drop path (Zoph et al., section 4.1), scheduled as in the Slim code.

  In training, each operation's output other than an identity is zeroed for
  a whole example with probability 1 - keep_prob, and scaled by 1 /
  keep_prob otherwise. keep_prob falls linearly with the global step, from
  1 at step 0 to its lowest at `total_steps` (and stays there), and is lower
  for deeper cells: for the cell at `cell_number` (0 for the first cell,
  stem cells included) of `total_cells`,

    keep_prob = 1 - (cell_number + 1) / total_cells
                  x min(1, global_step / total_steps) x (1 - final_keep_prob)

  so the last cell reaches `final_keep_prob`.

  Attributes:
    final_keep_prob: the keep probability of the last cell at the end.
    total_cells: the cells of the network, stem cells included.
    total_steps: the global step at which the schedule ends.
  """
  final_keep_prob: float
  total_cells: int
  total_steps: int

  def __post_init__(self):
    if not 0 < self.final_keep_prob <= 1:
      raise ValueError('drop_path_keep_prob must be in (0, 1], got %r'
                       % (self.final_keep_prob,))
    if self.total_steps < 1:
      raise ValueError('total_training_steps must be >= 1, got %r; it is '
                       'the step at which drop path reaches its lowest keep '
                       'probability' % (self.total_steps,))

  def keep_prob(self, cell_number, global_step):
    """The keep probability (a float32 tensor) of a cell at a step."""
    depth_drop = ((cell_number + 1) / self.total_cells *
                  (1 - self.final_keep_prob))
    progress = tf.minimum(
        1.0, tf.cast(global_step, tf.float32) / self.total_steps)
    return tf.subtract(1.0, progress * depth_drop, name='keep_prob')

  def apply(self, net, cell_number):
    """`net`, each example dropped or scaled up."""
    # Upstream creates a missing global step here, in the scope of the first
    # operation: a graph built without one then holds the same variables.
    global_step = tf.train.get_or_create_global_step()
    with tf.name_scope('drop_path'):
      keep_prob = self.keep_prob(cell_number, global_step)
      batch_size = tf.shape(net)[0]
      kept = tf.floor(keep_prob + tf.random_uniform([batch_size, 1, 1, 1]))
      return net * tf.cast(kept / keep_prob, net.dtype)


def _width(net):
  return net.shape[2]


def _channels(net):
  return net.shape[3]


def factorized_reduction(net, filters, stride):
  """`net` at `filters` channels and 1/stride of its side, pixels kept.

  Stride 1 is a 1x1 convolution. Stride 2 concatenates two 1x1 convolutions
  of half the channels each: one on the even pixels of the rows and columns,
  one on the odd ones (zero-padded at the bottom and right), so that no
  pixel is skipped. Then batch norm.
  """
  if stride == 1:
    net = slim.conv2d(net, filters, 1, scope='path_conv')
    return slim.batch_norm(net, scope='path_bn')
  even = net[:, ::stride, ::stride, :]
  shifted = tf.pad(net[:, 1:, 1:, :], [[0, 0], [0, 1], [0, 1], [0, 0]])
  odd = shifted[:, ::stride, ::stride, :]
  even = slim.conv2d(even, filters // 2, 1, scope='path1_conv')
  odd = slim.conv2d(odd, filters - filters // 2, 1, scope='path2_conv')
  net = tf.concat([even, odd], axis=3)
  return slim.batch_norm(net, scope='final_path_bn')


def _matched_previous(previous, net, filters):
  """Hidden state 1: the output of the cell two back at the size of `net`
  and `filters` channels (`net` itself when there is none)."""
  if previous is None:
    return net
  if _width(previous) != _width(net):
    return factorized_reduction(tf.nn.relu(previous), filters, stride=2)
  if _channels(previous) != filters:
    previous = slim.conv2d(tf.nn.relu(previous), filters, 1, scope='prev_1x1')
    return slim.batch_norm(previous, scope='prev_bn')
  return previous


def _separable(net, operation, filters, stride):
  side = '%dx%d' % (operation.size, operation.size)
  for layer in range(1, operation.layers + 1):
    net = slim.separable_conv2d(
        tf.nn.relu(net), filters, operation.size, depth_multiplier=1,
        stride=stride if layer == 1 else 1,
        scope='separable_%s_%d' % (side, layer))
    net = slim.batch_norm(net, scope='bn_sep_%s_%d' % (side, layer))
  return net


def _projected(net, filters, stride=1):
  net = slim.conv2d(net, filters, 1, stride=stride, scope='1x1')
  return slim.batch_norm(net, scope='bn_1')


def _operation(net, operation, filters, stride):
  """One side of a combination, at `filters` channels."""
  if operation.kind == 'separable':
    return _separable(net, operation, filters, stride)
  if operation.kind == 'identity':
    if stride == 1 and _channels(net) == filters:
      return net
    return _projected(tf.nn.relu(net), filters, stride)
  pool = {'avg_pool': slim.avg_pool2d, 'max_pool': slim.max_pool2d}
  net = pool[operation.kind](net, operation.size, stride=stride,
                             padding='SAME')
  if _channels(net) != filters:
    net = _projected(net, filters)
  return net


def _concatenated_output(states, left_out):
  """The states not left out, matched to the last one's size and width."""
  last = states[-1]
  outputs = []
  for index, state in enumerate(states):
    if index in left_out:
      continue
    if _width(state) != _width(last) or _channels(state) != _channels(last):
      with tf.variable_scope('reduction_%d' % index):
        stride = 2 if _width(state) != _width(last) else 1
        state = factorized_reduction(state, _channels(last), stride)
    outputs.append(state)
  return tf.concat(outputs, axis=3)


def cell(net, previous, structure, filters, stride, scope, drop_path=None,
         cell_number=0):
  """Builds one cell.

  Args:
    net: the output of the cell before, [batch, height, width, depth].
    previous: the output of the cell two back, or None.
    structure: a CellStructure.
    filters: the channels of every operation.
    stride: 2 in a reduction cell; only operations on hidden states 0 and 1
      stride.
    scope: the variable scope, e.g. 'cell_3'.
    drop_path: a DropPath, or None for no drop path (evaluation).
    cell_number: the cell's place in the drop-path schedule.

  Returns:
    The cell's output: filters x (hidden states not left out) channels.
  """
  with tf.variable_scope(scope):
    previous = _matched_previous(previous, net, filters)
    net = slim.conv2d(tf.nn.relu(net), filters, 1, scope='1x1')
    net = slim.batch_norm(net, scope='beginning_bn')
    states = [net, previous]
    for index, combination in enumerate(structure.combinations):
      with tf.variable_scope('comb_iter_%d' % index):
        halves = []
        for side, operation, state in (
            ('left', combination.left, combination.left_input),
            ('right', combination.right, combination.right_input)):
          with tf.variable_scope(side):
            half = _operation(states[state], operation, filters,
                              stride if state < 2 else 1)
            if drop_path is not None and operation != IDENTITY:
              half = drop_path.apply(half, cell_number)
          halves.append(half)
        states.append(tf.add(*halves, name='combine'))
    with tf.variable_scope('cell_output'):
      return _concatenated_output(states, structure.left_out)
