"""An existing-style Slim training program, as research repositories have them.

It is written the way programs built on upstream TF-Slim's
train_image_classifier.py are: absl flags through `tf.app.flags`, a
`DeploymentConfig`, a `DatasetDataProvider` feeding `tf.train.batch` and a
`slim.prefetch_queue`, clones from `model_deploy.create_clones`,
`slim.learning.train` as the loop. It imports only what such a program
imports (`tensorflow.compat.v1`, `tf_slim`, the Slim `datasets`,
`deployment`, `nets`, `preprocessing` packages) and never calls
`disable_eager_execution()`: the tests run it unchanged.

    python -m tf2_compat.run_slim tests/upstream_style_train.py \\
        --dataset_name=digits --dataset_dir=/tmp/digits --model_name=lenet \\
        --num_clones=2 --clone_on_cpu --batch_size=32 --optimizer=adam \\
        --learning_rate=0.001 --max_number_of_steps=500 \\
        --train_dir=/tmp/digits_train

and `tests/upstream_style_eval.py` then measures the checkpoint with
`slim.evaluation.evaluate_once`. tests/test_upstream_style.py runs both.
"""

import tensorflow.compat.v1 as tf
import tf_slim as slim

from datasets import dataset_factory
from deployment import model_deploy
from nets import nets_factory
from preprocessing import preprocessing_factory

flags = tf.app.flags

flags.DEFINE_string('master', '', 'The address of the TensorFlow master.')
flags.DEFINE_string('train_dir', '/tmp/tfmodel/',
                    'Where checkpoints and event logs are written.')
flags.DEFINE_integer('num_clones', 1, 'Model clones on this machine.')
flags.DEFINE_boolean('clone_on_cpu', False, 'Put every clone on the CPU.')
flags.DEFINE_integer('worker_replicas', 1, 'Number of worker replicas.')
flags.DEFINE_integer('num_ps_tasks', 0, 'Number of parameter server tasks.')
flags.DEFINE_integer('task', 0, 'Task id of this replica.')
flags.DEFINE_boolean('sync_replicas', False,
                     'Aggregate the replicas with a SyncReplicasOptimizer.')
flags.DEFINE_integer('replicas_to_aggregate', 1,
                     'Gradients aggregated per update with --sync_replicas.')
flags.DEFINE_integer('num_readers', 2, 'Parallel readers of the dataset.')
flags.DEFINE_integer('num_preprocessing_threads', 2,
                     'Threads of the batching queue.')
flags.DEFINE_integer('log_every_n_steps', 50, 'Steps between loss logs.')
flags.DEFINE_integer('save_summaries_secs', 60, 'Seconds between summaries.')
flags.DEFINE_integer('save_interval_secs', 60, 'Seconds between checkpoints.')

flags.DEFINE_string('optimizer', 'sgd', '"sgd", "momentum" or "adam".')
flags.DEFINE_float('learning_rate', 0.01, 'Initial learning rate.')
flags.DEFINE_float('momentum', 0.9, 'Momentum of "momentum".')
flags.DEFINE_float('learning_rate_decay_factor', 1.0,
                   'Exponential decay factor; 1.0 keeps the rate fixed.')
flags.DEFINE_float('num_epochs_per_decay', 2.0, 'Epochs between decays.')
flags.DEFINE_float('weight_decay', 0.00004, 'L2 weight decay.')
flags.DEFINE_float('clip_gradient_norm', 0.0,
                   'Clip the gradients to this global norm (0: no clipping).')

flags.DEFINE_string('dataset_name', 'digits', 'The dataset to train on.')
flags.DEFINE_string('dataset_split_name', 'train', 'The split to train on.')
flags.DEFINE_string('dataset_dir', None, 'Where the dataset files are.')
flags.DEFINE_string('model_name', 'lenet', 'The network to train.')
flags.DEFINE_string('preprocessing_name', None,
                    'The preprocessing; by default the network\'s own.')
flags.DEFINE_integer('batch_size', 32, 'Examples per clone and step.')
flags.DEFINE_integer('max_number_of_steps', None, 'Steps to train for.')
flags.DEFINE_integer('shuffle_seed', 0, 'Seed of the input shuffling.')

flags.DEFINE_string('checkpoint_path', None,
                    'A checkpoint to start from (fine-tuning).')
flags.DEFINE_string('checkpoint_exclude_scopes', None,
                    'Comma-separated scopes not restored from it.')
flags.DEFINE_string('trainable_scopes', None,
                    'Comma-separated scopes to train; all by default.')

FLAGS = flags.FLAGS


def _configure_learning_rate(num_samples_per_epoch, global_step):
  """The learning rate: fixed, or decayed every num_epochs_per_decay."""
  if FLAGS.learning_rate_decay_factor == 1.0:
    return tf.constant(FLAGS.learning_rate, name='fixed_learning_rate')
  global_batch = FLAGS.batch_size * FLAGS.num_clones
  if FLAGS.sync_replicas:
    global_batch *= FLAGS.replicas_to_aggregate
  decay_steps = int(num_samples_per_epoch * FLAGS.num_epochs_per_decay
                    / global_batch)
  return tf.train.exponential_decay(
      FLAGS.learning_rate, global_step, decay_steps,
      FLAGS.learning_rate_decay_factor, staircase=True,
      name='exponential_decay_learning_rate')


def _configure_optimizer(learning_rate):
  if FLAGS.optimizer == 'sgd':
    return tf.train.GradientDescentOptimizer(learning_rate)
  if FLAGS.optimizer == 'momentum':
    return tf.train.MomentumOptimizer(learning_rate, FLAGS.momentum)
  if FLAGS.optimizer == 'adam':
    return tf.train.AdamOptimizer(learning_rate)
  raise ValueError('Optimizer [%s] was not recognized' % FLAGS.optimizer)


def _get_init_fn():
  """Restores --checkpoint_path into a fresh --train_dir, else None."""
  if FLAGS.checkpoint_path is None:
    return None
  if tf.train.latest_checkpoint(FLAGS.train_dir):
    tf.logging.info('Ignoring --checkpoint_path: %s already has a checkpoint',
                    FLAGS.train_dir)
    return None
  exclusions = [scope.strip()
                for scope in (FLAGS.checkpoint_exclude_scopes or '').split(',')
                if scope.strip()]
  variables_to_restore = [
      var for var in slim.get_model_variables()
      if not any(var.op.name.startswith(scope) for scope in exclusions)]
  checkpoint_path = FLAGS.checkpoint_path
  if tf.gfile.IsDirectory(checkpoint_path):
    checkpoint_path = tf.train.latest_checkpoint(checkpoint_path)
  tf.logging.info('Fine-tuning from %s', checkpoint_path)
  return slim.assign_from_checkpoint_fn(checkpoint_path, variables_to_restore)


def _get_variables_to_train():
  if FLAGS.trainable_scopes is None:
    return tf.trainable_variables()
  variables_to_train = []
  for scope in FLAGS.trainable_scopes.split(','):
    variables_to_train.extend(
        tf.get_collection(tf.GraphKeys.TRAINABLE_VARIABLES, scope.strip()))
  return variables_to_train


def main(_):
  if not FLAGS.dataset_dir:
    raise ValueError('You must supply the dataset directory with '
                     '--dataset_dir')

  tf.logging.set_verbosity(tf.logging.INFO)
  with tf.Graph().as_default():
    deploy_config = model_deploy.DeploymentConfig(
        num_clones=FLAGS.num_clones,
        clone_on_cpu=FLAGS.clone_on_cpu,
        replica_id=FLAGS.task,
        num_replicas=FLAGS.worker_replicas,
        num_ps_tasks=FLAGS.num_ps_tasks)

    with tf.device(deploy_config.variables_device()):
      global_step = slim.create_global_step()

    dataset = dataset_factory.get_dataset(
        FLAGS.dataset_name, FLAGS.dataset_split_name, FLAGS.dataset_dir)
    network_fn = nets_factory.get_network_fn(
        FLAGS.model_name, num_classes=dataset.num_classes,
        weight_decay=FLAGS.weight_decay, is_training=True)
    image_preprocessing_fn = preprocessing_factory.get_preprocessing(
        FLAGS.preprocessing_name or FLAGS.model_name, is_training=True)

    # The input: readers and shuffling queue, preprocessing, batches, and a
    # prefetch queue the clones dequeue from.
    with tf.device(deploy_config.inputs_device()):
      provider = slim.dataset_data_provider.DatasetDataProvider(
          dataset,
          num_readers=FLAGS.num_readers,
          common_queue_capacity=20 * FLAGS.batch_size,
          common_queue_min=10 * FLAGS.batch_size,
          seed=FLAGS.shuffle_seed)
      image, label = provider.get(['image', 'label'])
      train_image_size = network_fn.default_image_size
      image = image_preprocessing_fn(image, train_image_size, train_image_size)
      images, labels = tf.train.batch(
          [image, label],
          batch_size=FLAGS.batch_size,
          num_threads=FLAGS.num_preprocessing_threads,
          capacity=5 * FLAGS.batch_size)
      batch_queue = slim.prefetch_queue.prefetch_queue(
          [images, labels], capacity=2 * deploy_config.num_clones)

    def clone_fn(batch_queue):
      images, labels = batch_queue.dequeue()
      logits, end_points = network_fn(images)
      tf.losses.sparse_softmax_cross_entropy(labels, logits)
      return end_points

    summaries = set(tf.get_collection(tf.GraphKeys.SUMMARIES))
    clones = model_deploy.create_clones(deploy_config, clone_fn, [batch_queue])
    first_clone_scope = deploy_config.clone_scope(0)
    # Batch norm updates of the first clone only, as upstream.
    update_ops = tf.get_collection(tf.GraphKeys.UPDATE_OPS, first_clone_scope)

    end_points = clones[0].outputs
    for end_point in end_points:
      summaries.add(tf.summary.histogram('activations/' + end_point,
                                         end_points[end_point]))
    for loss in tf.get_collection(tf.GraphKeys.LOSSES, first_clone_scope):
      summaries.add(tf.summary.scalar('losses/%s' % loss.op.name, loss))

    with tf.device(deploy_config.optimizer_device()):
      learning_rate = _configure_learning_rate(dataset.num_samples,
                                               global_step)
      optimizer = _configure_optimizer(learning_rate)
      summaries.add(tf.summary.scalar('learning_rate', learning_rate))

    if FLAGS.sync_replicas:
      optimizer = tf.train.SyncReplicasOptimizer(
          opt=optimizer,
          replicas_to_aggregate=FLAGS.replicas_to_aggregate,
          total_num_replicas=FLAGS.worker_replicas)

    total_loss, clones_gradients = model_deploy.optimize_clones(
        clones, optimizer, var_list=_get_variables_to_train())
    summaries.add(tf.summary.scalar('total_loss', total_loss))

    if FLAGS.clip_gradient_norm > 0:
      clones_gradients = slim.learning.clip_gradient_norms(
          clones_gradients, FLAGS.clip_gradient_norm)
    grad_updates = optimizer.apply_gradients(clones_gradients,
                                             global_step=global_step)
    update_ops.append(grad_updates)
    update_op = tf.group(*update_ops)
    with tf.control_dependencies([update_op]):
      train_tensor = tf.identity(total_loss, name='train_op')

    summaries |= set(tf.get_collection(tf.GraphKeys.SUMMARIES,
                                       first_clone_scope))
    summary_op = tf.summary.merge(list(summaries), name='summary_op')

    slim.learning.train(
        train_tensor,
        logdir=FLAGS.train_dir,
        master=FLAGS.master,
        is_chief=(FLAGS.task == 0),
        init_fn=_get_init_fn(),
        summary_op=summary_op,
        number_of_steps=FLAGS.max_number_of_steps,
        log_every_n_steps=FLAGS.log_every_n_steps,
        save_summaries_secs=FLAGS.save_summaries_secs,
        save_interval_secs=FLAGS.save_interval_secs,
        sync_optimizer=optimizer if FLAGS.sync_replicas else None)


if __name__ == '__main__':
  tf.app.run()
