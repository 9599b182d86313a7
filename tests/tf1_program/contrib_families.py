"""A TF 1.x program using one `tf.contrib` family, trained on 2 clones.

Written as TF 1.x programs built on model_deploy were, and run unchanged
on TF 2.21 through

    python -m tf2_compat.run_slim --tf1 tests/tf1_program/contrib_families.py \\
        --family=lookup --train_dir=/tmp/contrib_lookup

(tests/test_contrib_families.py runs each family). The task: tell whether
the first of 4 numbers is larger than the second, from a fixed random
set of 512 examples. `--family` picks the contrib names the input, the
model, the loss, the optimizer and the loop are built with; every run
prints `step N` for its last step and `FAMILY: ...` lines the test reads.
"""

import numpy as np
import tensorflow as tf

from deployment import model_deploy

slim = tf.contrib.slim

tf.app.flags.DEFINE_string('family', 'layers', 'The tf.contrib family.')
tf.app.flags.DEFINE_string('train_dir', None, 'Where checkpoints go.')
tf.app.flags.DEFINE_integer('max_number_of_steps', 60, 'Steps to train.')
tf.app.flags.DEFINE_string('hparams', 'learning_rate=0.3,hidden=[16]',
                           'Overrides of the default hyperparameters.')
FLAGS = tf.app.flags.FLAGS

NUM_CLONES = 2
BATCH_SIZE = 16  # Per clone.
LABEL_NAMES = ['first', 'second']  # Which of the two numbers is larger.


def _examples():
  features = np.random.RandomState(0).uniform(
      -1, 1, size=[512, 4]).astype(np.float32)
  labels = (features[:, 1] > features[:, 0]).astype(np.int64)
  return features, labels


def _dataset(family):
  """Batches of (features, label), repeated."""
  features, labels = _examples()
  if family == 'lookup':  # Labels as names, made ids in the clones.
    names = tf.constant(np.array(LABEL_NAMES)[labels])
    dataset = tf.data.Dataset.from_tensor_slices((features, names))
    return dataset.repeat().batch(BATCH_SIZE)
  if family != 'data':
    dataset = tf.data.Dataset.from_tensor_slices((features, labels))
    return dataset.repeat().batch(BATCH_SIZE)
  shards = tf.data.Dataset.range(4).apply(
      tf.contrib.data.parallel_interleave(
          lambda shard: tf.data.Dataset.from_tensor_slices(
              (features, labels)).shard(4, shard), cycle_length=2))
  shards = shards.apply(tf.contrib.data.shuffle_and_repeat(512, seed=1))
  batches = shards.apply(tf.contrib.data.batch_and_drop_remainder(
      BATCH_SIZE))
  return batches.prefetch(tf.contrib.data.AUTOTUNE)


@tf.contrib.framework.add_arg_scope
def _scaled(inputs, scale=1.0):
  return inputs * scale


def _logits(features, family, hparams, is_training):
  if family == 'layers':
    net = features
    for depth in hparams.hidden:
      net = tf.contrib.layers.fully_connected(
          net, depth, weights_initializer=(
              tf.contrib.layers.variance_scaling_initializer()),
          weights_regularizer=tf.contrib.layers.l2_regularizer(1e-4),
          normalizer_fn=tf.contrib.layers.batch_norm,
          normalizer_params={'is_training': is_training})
      net = tf.contrib.layers.dropout(net, 0.9, is_training=is_training)
    return tf.contrib.layers.fully_connected(
        net, 2, activation_fn=None,
        weights_initializer=tf.contrib.layers.xavier_initializer())
  if family == 'framework':
    with tf.contrib.framework.arg_scope([_scaled], scale=2.0):
      features = _scaled(features)
    weights = tf.contrib.framework.model_variable(
        'weights', shape=[4, 2], initializer=tf.zeros_initializer())
    return tf.matmul(features, weights)
  net = slim.stack(features, slim.fully_connected, hparams.hidden)
  return slim.fully_connected(net, 2, activation_fn=None)


def _loss(logits, labels, family):
  onehot = tf.one_hot(labels, 2)
  if family == 'losses':
    tf.contrib.losses.softmax_cross_entropy(logits, onehot)
  else:
    tf.losses.softmax_cross_entropy(onehot, logits)


def _optimizer(family, hparams):
  optimizer = tf.train.GradientDescentOptimizer(hparams.learning_rate)
  if family == 'opt':
    return tf.contrib.opt.MovingAverageOptimizer(optimizer,
                                                 average_decay=0.5)
  return optimizer


def _metrics(logits, labels, family):
  """(value, update) pairs of the training batch's metrics."""
  predictions = tf.argmax(logits, 1)
  if family == 'lookup':
    names = tf.contrib.lookup.index_to_string_table_from_tensor(
        tf.constant(LABEL_NAMES)).lookup(predictions)
    return {'named_first': tf.contrib.metrics.streaming_mean(
        tf.cast(tf.equal(names, 'first'), tf.float32))}
  if family != 'metrics':
    return {}
  values, updates = tf.contrib.metrics.aggregate_metric_map({
      'accuracy': tf.contrib.metrics.streaming_accuracy(predictions, labels),
      'mean_label': tf.contrib.metrics.streaming_mean(
          tf.cast(labels, tf.float32)),
  })
  return {name: (values[name], updates[name]) for name in values}


def main(_):
  tf.logging.set_verbosity(tf.logging.WARN)
  family = FLAGS.family
  # A fixed start: the figures the test reads are then the same each run.
  tf.set_random_seed(1)
  hparams = tf.contrib.training.HParams(learning_rate=0.1, hidden=[8])
  hparams.parse(FLAGS.hparams)
  config = model_deploy.DeploymentConfig(num_clones=NUM_CLONES,
                                         clone_on_cpu=True)
  with tf.device(config.variables_device()):
    global_step = tf.contrib.framework.get_or_create_global_step()
  with tf.device(config.inputs_device()):
    iterator = tf.data.make_one_shot_iterator(_dataset(family))

  label_ids = tf.contrib.lookup.HashTable(
      tf.contrib.lookup.KeyValueTensorInitializer(
          tf.constant(LABEL_NAMES), tf.constant([0, 1], tf.int64)), -1)

  def clone_fn():
    features, labels = iterator.get_next()
    if family == 'lookup':
      labels = label_ids.lookup(labels)
    logits = _logits(features, family, hparams, is_training=True)
    _loss(logits, labels, family)
    return _metrics(logits, labels, family)

  clones = model_deploy.create_clones(config, clone_fn)
  optimizer = _optimizer(family, hparams)
  total_loss, gradients = model_deploy.optimize_clones(clones, optimizer)
  update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS, clones[0].scope)
  with tf.control_dependencies(update_ops):
    apply_op = optimizer.apply_gradients(gradients, global_step=global_step)
  with tf.control_dependencies([apply_op]):
    train_op = tf.identity(total_loss, name='train_op')
  metrics = clones[0].outputs
  if family == 'training':
    _train_with_contrib_training(train_op, global_step)
  else:
    _train(train_op, global_step, metrics, optimizer)


def _train_with_contrib_training(train_op, global_step):
  loss = tf.contrib.training.train(
      train_op, FLAGS.train_dir, save_summaries_steps=None,
      hooks=[tf.train.StopAtStepHook(last_step=FLAGS.max_number_of_steps)])
  checkpoint = tf.train.latest_checkpoint(FLAGS.train_dir)
  print('step %d' % tf.train.load_variable(checkpoint, global_step.op.name))
  print('training: final loss %.4f' % loss)


def _train(train_op, global_step, metrics, optimizer):
  updates = [update for _, update in metrics.values()]
  with tf.Session() as session:
    session.run([tf.global_variables_initializer(),
                 tf.local_variables_initializer(), tf.tables_initializer()])
    for _ in range(FLAGS.max_number_of_steps):
      loss, step, _ = session.run([train_op, global_step, updates])
    print('step %d' % (step + 1))
    print('%s: final loss %.4f' % (FLAGS.family, loss))
    for name, (value, _) in sorted(metrics.items()):
      print('%s: %s %.4f' % (FLAGS.family, name, session.run(value)))
    if FLAGS.family == 'opt':
      _save_the_averages(session, optimizer)
    if FLAGS.family == 'framework':
      structure = tf.contrib.framework.nest.pack_sequence_as(
          {'step': 0}, [int(step) + 1])
      print('framework: packed %r' % structure)


def _save_the_averages(session, optimizer):
  """Saves with the swapping saver, then reads the checkpoint back under
  the variables' names: it holds their moving averages."""
  weights = [v for v in tf.trainable_variables()]
  averages = session.run([optimizer._ema.average(v) for v in weights])  # pylint: disable=protected-access
  path = optimizer.swapping_saver().save(session,
                                         FLAGS.train_dir + '/model.ckpt')
  saved = [tf.train.load_variable(path, v.op.name) for v in weights]
  print('opt: checkpoint holds the averages %s' % all(
      np.array_equal(a, s) for a, s in zip(averages, saved)))
  print('opt: averages differ from the weights %s' % any(
      not np.array_equal(a, w)
      for a, w in zip(averages, session.run(weights))))


if __name__ == '__main__':
  tf.app.run()
