"""Flags of train_image_classifier.py, under the upstream Slim names.

The flags it shares with the evaluation script are in common_flags.

Upstream defaults are kept. Flags that differ from upstream:
  --batch_size       still per clone; the start-up log prints the global batch.
  --num_epochs_per_decay, --warmup_epochs
                     epochs of data computed from the global batch
                     (upstream ignored num_clones).
  --quantize_delay   quantization-aware training without tf.contrib.quantize,
                     which TF 2.x removed: the layers are built fake-quantized
                     (nets/quantize.py); float32 only, no --sync_batch_norm.
  --batch_norm_decay new: the decay of the batch norm moving averages, for
                     a short run of a network whose own decay (0.9997) is
                     meant for hundreds of thousands of steps.
  --train_dir_lock   new: `none` trains without train_dir/train.lock, on a
                     file system that has no flock (training/train_dir_lock.py).
  --ps_strategy, --cache_variable_reads, --non_chief_wait_secs,
  --step_timeout_secs,
  --ps_hosts, --worker_hosts, --job_name, --slurm, --slurm_port_base
                     new, for clusters (see clusters/cluster.py and
                     clusters/slurm.py).
"""

from absl import flags

from deployment import collectives
from training import common_flags
from training import flag_checks

# Deployment.
flags.DEFINE_string('train_dir', '/tmp/tfmodel/',
                    'Directory where checkpoints and event logs are written.')
flags.DEFINE_string('train_dir_lock', 'flock',
                    'How the chief keeps a second run off --train_dir: '
                    '"flock" holds train_dir/train.lock; "none" holds nothing, '
                    'for a file system without flock (then start one run at '
                    'a time yourself).')
flags.DEFINE_integer('worker_replicas', 1, 'Number of worker replicas.')
flags.DEFINE_integer('num_ps_tasks', 0,
                     'Number of parameter servers; 0 keeps variables local.')
flags.DEFINE_integer('num_readers', 4,
                     'Number of files read in parallel.')
flags.DEFINE_integer('log_every_n_steps', 10,
                     'How often (in steps) progress is logged.')
flags.DEFINE_integer('save_summaries_secs', 600,
                     'How often (in seconds) summaries are saved.')
flags.DEFINE_integer('save_interval_secs', 600,
                     'How often (in seconds) the model is checkpointed; a '
                     'checkpoint is also written at the end.')
flags.DEFINE_integer('task', 0, 'Task id of the replica running the training.')

flags.DEFINE_bool('sync_batch_norm', False,
                  'Normalise with the batch statistics of all clones '
                  'together (CPU clones then get a logical CPU device each).')
flags.DEFINE_float('collective_timeout_secs', 60.0,
                   'A collective op (sync batch norm) whose members do not '
                   'all arrive fails after this many seconds.')

flags.DEFINE_integer('accumulation_steps', 1,
                     'Micro-steps per update: gradients of this many runs are '
                     'accumulated and applied as one step; the global batch '
                     'and the global step count updates.')
flags.DEFINE_integer('replica_averaging_steps', None,
                     'All-reduce workers (no ps tasks) only: each worker '
                     'applies its own gradients and every this many global '
                     'steps the workers average their weights, instead of '
                     'averaging the gradients every step.')
flags.DEFINE_enum('gradient_compression', 'none', ['none', 'fp16', 'bf16'],
                  'All-reduce workers (no ps tasks) only: send the '
                  'gradients (and the averaged weights) as 16-bit floats, '
                  'half the bytes; averaged in 16 bits, applied in 32.')
flags.DEFINE_integer('all_reduce_buffer_bytes',
                     collectives.DEFAULT_BUFFER_BYTES,
                     'All-reduce workers (no ps tasks) only: the gradients '
                     'go in buffers of at most this many bytes, one '
                     'collective each (several under way keep the link '
                     'busy; large tensors are split).')
flags.DEFINE_float('clip_gradient_norm', None,
                   'Clip the gradient by this global norm (of the gradient '
                   'summed over the clones and micro-steps); None: no '
                   'clipping.')

flags.DEFINE_string('precision', 'float32',
                    'float32, mixed_float16 (float16 layers, float32 weights, '
                    'dynamic loss scaling) or mixed_bfloat16.')

# Optimizer.
flags.DEFINE_float('weight_decay', 0.00004,
                   'The weight decay on the model weights.')
flags.DEFINE_float('batch_norm_decay', None,
                   'Decay of the batch norm moving averages, for a network '
                   'whose arg scope takes batch_norm_decay (MobileNets, '
                   'ResNets, Inception v3 and v4, NASNets); unset: the '
                   'network\'s own (0.9997 for MobileNet v1, whose averages '
                   'keep 0.9997^steps of their initial values: 17% after '
                   '6000 steps).')
flags.DEFINE_string('optimizer', 'rmsprop',
                    'One of "adadelta", "adagrad", "adam", "ftrl", '
                    '"momentum", "sgd" or "rmsprop".')
flags.DEFINE_float('adadelta_rho', 0.95, 'The decay rate for adadelta.')
flags.DEFINE_float('adagrad_initial_accumulator_value', 0.1,
                   'Starting value for the AdaGrad accumulators.')
flags.DEFINE_float('adam_beta1', 0.9, 'Decay rate of 1st moment estimates.')
flags.DEFINE_float('adam_beta2', 0.999, 'Decay rate of 2nd moment estimates.')
flags.DEFINE_float('opt_epsilon', 1.0, 'Epsilon term for the optimizer.')
flags.DEFINE_float('ftrl_learning_rate_power', -0.5,
                   'The learning rate power.')
flags.DEFINE_float('ftrl_initial_accumulator_value', 0.1,
                   'Starting value for the FTRL accumulators.')
flags.DEFINE_float('ftrl_l1', 0.0, 'The FTRL l1 regularization strength.')
flags.DEFINE_float('ftrl_l2', 0.0, 'The FTRL l2 regularization strength.')
flags.DEFINE_float('momentum', 0.9, 'Momentum for Momentum optimizer.')
flags.DEFINE_float('rmsprop_momentum', 0.9, 'Momentum.')
flags.DEFINE_float('rmsprop_decay', 0.9, 'Decay term for RMSProp.')
flags.DEFINE_integer('quantize_delay', -1,
                     'Quantization-aware training: fake-quantize weights and '
                     'activations (8 bits, batch norm folded) from this '
                     'global step on; -1: float training.')

# Learning rate.
flags.DEFINE_string('learning_rate_decay_type', 'exponential',
                    'One of "fixed", "exponential" or "polynomial".')
flags.DEFINE_float('learning_rate', 0.01, 'Initial learning rate.')
flags.DEFINE_float('end_learning_rate', 0.0001,
                   'The minimal end learning rate (polynomial decay).')
flags.DEFINE_float('label_smoothing', 0.0, 'The amount of label smoothing.')
flags.DEFINE_float('learning_rate_decay_factor', 0.94,
                   'Learning rate decay factor.')
flags.DEFINE_float('num_epochs_per_decay', 2.0,
                   'Epochs of data (at the global batch) after which the '
                   'learning rate decays.')
flags.DEFINE_float('warmup_epochs', 0,
                   'Epochs of linear warmup from 0 to --learning_rate.')
flags.DEFINE_bool('sync_replicas', False,
                  'Whether to use SyncReplicasOptimizer.')
flags.DEFINE_integer('replicas_to_aggregate', 1,
                     'Number of replica gradients aggregated per global step '
                     '(sync replicas).')

# Dataset and model.
common_flags.define_split_and_batch('train', 32)
flag_checks.DEFINE_whole_number(
    'train_image_size', None, 'Train image size; None: the network default.',
    flag_checks.TRAIN_RANGES)
flags.DEFINE_integer('max_number_of_steps', None,
                     'The maximum number of training steps.')

# Fine-tuning.
flags.DEFINE_string('checkpoint_path', None,
                    'Checkpoint (prefix or directory) to fine-tune from; '
                    'used only while train_dir has no checkpoint.')
flags.DEFINE_string('checkpoint_exclude_scopes', None,
                    'Comma-separated scopes not restored from '
                    '--checkpoint_path.')
flags.DEFINE_string('trainable_scopes', None,
                    'Comma-separated scopes to train; None: all.')
flags.DEFINE_boolean('ignore_missing_vars', False,
                     'Skip variables missing from --checkpoint_path.')

# Clusters (new).
flags.DEFINE_string('ps_strategy', 'round_robin',
                    'How variables spread over ps tasks: "round_robin" or '
                    '"by_size".')
flags.DEFINE_boolean('cache_variable_reads', True,
                     'With ps tasks: each worker reads a variable from its '
                     'ps once per step and its clones share that copy '
                     '(false: every use reads from the ps, as upstream).')
flags.DEFINE_integer('non_chief_wait_secs', 30,
                     'How often a non-chief worker checks whether the chief '
                     'has initialised the model.')
flags.DEFINE_float('step_timeout_secs', None,
                   'A step that runs longer than this makes the worker probe '
                   'the tasks it needs; one that does not answer is named '
                   'and the worker exits 1 (None: 20 x the longest recent '
                   'step, at least 60 s, 600 s for the first step and the '
                   'session start).')
flags.DEFINE_integer('shuffle_seed', None,
                     'Seed of the input shuffling (None: random).')
flags.DEFINE_integer('random_seed', None,
                     'Graph-level seed of the weight initialisers and of '
                     'dropout (tf.set_random_seed; None: random).')
flags.DEFINE_string('ps_hosts', '',
                    'Comma-separated host:port of the ps tasks; with '
                    '--worker_hosts and --job_name, or use TF_CONFIG instead '
                    '(see clusters/cluster.py).')
flags.DEFINE_string('worker_hosts', '',
                    'Comma-separated host:port of the workers, the chief '
                    '(task 0) first.')
flags.DEFINE_string('job_name', '',
                    'This process\'s job in the cluster: "ps" or "worker"; '
                    'its index is --task.')
flags.DEFINE_integer('slurm_port_base', 8888,
                     'With --slurm: the port of the first task on each node; '
                     'the next task of a node takes the next port.')

FLAGS = flags.FLAGS
