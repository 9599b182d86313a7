"""Where a step of train_image_classifier.py goes beyond session.run(train_op).

Builds, in one process, make run's training graph exactly as the script
does (run_config.from_flags, build_training_graph and training_session:
the same hooks and MonitoredTrainingSession) and the upstream-style graph
of upstream_style_train.py (the same model and deploy(), queue input), then
times these variants, interleaved in --rounds rounds of --steps_per_round
steps (the first variant of a round rotates):

  script loop        the script's loop, `session.should_stop()` and
                     MonitoredSession.run(train_op) with its hooks, and
                     instrumented: every hook's before_run/after_run and
                     every tf.Session.run call is timed, so the step splits
                     into its main session.run, each hook's Python and
                     extra session.run calls, and MonitoredSession's own
                     machinery (the rest).
  train op alone     the same session's underlying tf.Session.run(train_op):
                     the floor every loop pays.
  + run options      the same with the empty RunOptions and the RunMetadata
                     that MonitoredSession passes to every run.
  + hooks' fetches   the main session.run as MonitoredSession issues it:
                     train op, the fetches the hooks merged in, the options
                     and metadata.
  queues: train op alone       tf.Session.run(train_op) of the queue graph.
  queues: slim train_step      slim.learning.train_step, upstream's step:
                               the step with the global step, then its
                               should_log and should_stop runs.
  tf.data batches alone        both clones' get_next of the script's graph.
  queue batches alone          both clones' dequeue of the queue graph.

Checkpoints and summaries keep the job's --save_interval_secs and
--save_summaries_secs (600 s), so, as in an 800-step make run, they fire
only at the start, which the warm-up absorbs.

Run by benchmarks/training_loop.py, which puts the tables in its result
file; alone (training flags after `--`):

  .venv/bin/python benchmarks/step_profile.py --rounds 5 -- \
      --dataset_name=digits --dataset_dir=/tmp/digits --model_name=lenet \
      --num_clones=2 --clone_on_cpu --batch_size=32 --optimizer=adam \
      --opt_epsilon=1e-8 --learning_rate=0.001 \
      --learning_rate_decay_type=fixed --max_number_of_steps=800 \
      --log_every_n_steps=100 --train_dir=/tmp/ignored

It prints the Markdown tables and, on its last line, them as JSON.
"""

import argparse
import collections
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO not in sys.path:
  sys.path.insert(0, REPO)

# pylint: disable=g-import-not-at-top,wrong-import-position
from tf2_compat.slim_compat import slim, tf
import train_image_classifier
from training import run_config
from training.flags import FLAGS
from training_loop import with_flag  # next to this script
import upstream_style_train  # next to this script
# pylint: enable=g-import-not-at-top,wrong-import-position

JSON_PREFIX = 'step_profile json: '
MAIN_RUN = 'step'  # Owner of the session.run that MonitoredSession issues.
NO_STOP = 10 ** 9  # --max_number_of_steps here: the variants never stop.
SCRIPT_LOOP = 'script loop: MonitoredSession + hooks'


def parse_args(argv):
  """(options, training flags): the flags follow `--` in argv."""
  split = argv.index('--') if '--' in argv else len(argv)
  parser = argparse.ArgumentParser(
      description=__doc__.split('\n\n', maxsplit=1)[0],
      formatter_class=argparse.ArgumentDefaultsHelpFormatter)
  parser.add_argument('--rounds', type=int, default=5)
  parser.add_argument('--steps_per_round', type=int, default=20,
                      help='timed steps of each variant per round')
  parser.add_argument('--warmup_steps', type=int, default=10,
                      help='untimed steps of each variant first')
  args = parser.parse_args(argv[:split])
  if min(args.rounds, args.steps_per_round) < 1:
    parser.error('--rounds and --steps_per_round must be >= 1')
  return args, argv[split + 1:]


class StepAccounting:
  """Splits the wall time of MonitoredSession steps by who spends it.

  Wraps, on the instances, every hook's before_run and after_run and the
  underlying tf.Session's run. While `enabled`, `seconds[(kind, owner)]`
  and `calls[(kind, owner)]` add up: kind 'hook' (a hook's method, its
  session.run calls included) or 'run' (tf.Session.run); owner a hook's
  class name or MAIN_RUN for the run that MonitoredSession issues itself.
  `main_run_args` keeps the arguments of the latest main run.
  """

  def __init__(self, monitored_session):
    self.enabled = False
    self.seconds = collections.Counter()
    self.calls = collections.Counter()
    self.main_run_args = None
    self._owner = None
    # pylint: disable=protected-access
    self.raw_session = monitored_session._tf_sess()
    hooks = monitored_session._hooks
    # pylint: enable=protected-access
    self.hook_names = [type(hook).__name__ for hook in hooks]
    self.raw_run = self.raw_session.run
    self.raw_session.run = self._timed(self.raw_run, 'run', None)
    for hook, name in zip(hooks, self.hook_names):
      for method in ('before_run', 'after_run'):
        setattr(hook, method, self._timed(getattr(hook, method), 'hook',
                                          name))

  def _timed(self, function, kind, owner):
    def timed(*args, **kwargs):
      if not self.enabled:
        return function(*args, **kwargs)
      outer_owner = self._owner
      who = owner or outer_owner or MAIN_RUN
      if kind == 'run' and who == MAIN_RUN:
        self.main_run_args = (args, kwargs)
      self._owner = who
      start = time.perf_counter()
      try:
        return function(*args, **kwargs)
      finally:
        self.seconds[(kind, who)] += time.perf_counter() - start
        self.calls[(kind, who)] += 1
        self._owner = outer_owner
    return timed


class Variant:
  """A way of running one step, and the times it took."""

  def __init__(self, name, input_name, step):
    self.name = name
    self.input_name = input_name
    self.step = step
    self.wall = []  # Seconds per timed step.
    self.cpu = []  # Process CPU seconds per timed step (all threads).


def script_variants(train_flags, train_dir):
  """The script's graph and session: (variants, accounting, graph, session).

  Like the script, run the steps and close the session with `graph` as the
  default graph: the checkpoint hook builds its saver ops when it saves.
  """
  FLAGS(['train_image_classifier.py'] + with_flag(
      with_flag(train_flags, 'max_number_of_steps', NO_STOP),
      'train_dir', train_dir))
  config = run_config.from_flags(FLAGS)
  graph = tf.Graph()
  with graph.as_default():
    training_graph = train_image_classifier.build_training_graph(config)
    get_next = [op.outputs for op in graph.get_operations()
                if op.type == 'IteratorGetNext']
    session = train_image_classifier.training_session(
        config, training_graph, config.master, ())
  accounting = StepAccounting(session)
  train_op = training_graph.train_op
  raw_run = accounting.raw_run

  def script_step():
    accounting.enabled = True
    try:
      if not session.should_stop():
        session.run(train_op)
    finally:
      accounting.enabled = False

  def with_options():
    _, kwargs = accounting.main_run_args
    raw_run(train_op, options=kwargs['options'],
            run_metadata=tf.RunMetadata())

  def main_run():
    args, kwargs = accounting.main_run_args
    raw_run(*args, **dict(kwargs, run_metadata=tf.RunMetadata()))

  variants = [
      Variant('train op alone', 'tf.data', lambda: raw_run(train_op)),
      Variant('train op + run options and metadata', 'tf.data',
              with_options),
      Variant("train op + hooks' fetches (the step's session.run)",
              'tf.data', main_run),
      Variant(SCRIPT_LOOP, 'tf.data', script_step),
      Variant('batches of both clones alone', 'tf.data',
              lambda: raw_run(get_next)),
  ]
  return variants, accounting, graph, session


def queue_variants(train_flags, train_dir):
  """The upstream-style graph in a plain session: (variants, closer)."""
  args = upstream_style_train.parse_args(
      with_flag(train_flags, 'train_dir', train_dir))
  graph = tf.Graph()
  with graph.as_default():
    upstream = upstream_style_train.build_graph(args)
    dequeues = [upstream.batch_queue.dequeue() for _ in range(args.num_clones)]
    global_step = upstream.global_step
    # What slim.learning.train passes to train_step.
    step_kwargs = {
        'should_stop': tf.greater_equal(global_step, NO_STOP),
        'should_log': tf.equal(tf.math.mod(global_step,
                                           args.log_every_n_steps), 0),
    }
    init = tf.group(tf.global_variables_initializer(),
                    tf.local_variables_initializer())
  session = tf.Session(graph=graph)
  session.run(init)
  coordinator = tf.train.Coordinator()
  with graph.as_default():  # The queue runners of the default graph start.
    threads = tf.train.start_queue_runners(session, coordinator)

  def close():
    coordinator.request_stop()
    session.close()
    coordinator.join(threads, stop_grace_period_secs=5,
                     ignore_live_threads=True)

  variants = [
      Variant('train op alone', 'queues',
              lambda: session.run(upstream.train_op)),
      Variant('slim.learning.train_step', 'queues',
              lambda: slim.learning.train_step(
                  session, upstream.train_op, global_step, step_kwargs)),
      Variant('batches of both clones alone', 'queues',
              lambda: session.run(dequeues)),
  ]
  return variants, close


def measure(args, train_flags):
  """Runs the variants; returns (variants, accounting)."""
  train_dir = tempfile.mkdtemp(prefix='step_profile_')
  try:
    script, accounting, script_graph, script_session = script_variants(
        train_flags, os.path.join(train_dir, 'script'))
    queues, close_queues = queue_variants(
        train_flags, os.path.join(train_dir, 'queues'))
    variants = script + queues
    with script_graph.as_default(), script_session:
      try:
        _run_rounds(args, variants, accounting)
      finally:
        close_queues()
  finally:
    shutil.rmtree(train_dir, ignore_errors=True)
  return variants, accounting


def _run_rounds(args, variants, accounting):
  """Warms every variant up, then times them in rotating rounds."""
  # The script loop warms up first: two others replay its main run.
  warmup_order = sorted(variants, key=lambda v: v.name != SCRIPT_LOOP)
  for variant in warmup_order:
    for _ in range(args.warmup_steps):
      variant.step()
  accounting.seconds.clear()
  accounting.calls.clear()
  for round_index in range(args.rounds):
    first = round_index % len(variants)
    for variant in variants[first:] + variants[:first]:
      for _ in range(args.steps_per_round):
        start_wall, start_cpu = time.perf_counter(), time.process_time()
        variant.step()
        variant.wall.append(time.perf_counter() - start_wall)
        variant.cpu.append(time.process_time() - start_cpu)


def variants_table(variants):
  """Markdown lines; ratios are to the first variant."""
  floor = statistics.median(variants[0].wall)
  lines = ['| each step runs | input | ms/step (median) | ms/step (mean) | '
           'CPU ms/step (median) | ratio to the first row |',
           '|---|---|---:|---:|---:|---:|']
  for variant in variants:
    median = statistics.median(variant.wall)
    lines.append('| %s | %s | %.1f | %.1f | %.1f | %.3f |' % (
        variant.name, variant.input_name, 1000 * median,
        1000 * statistics.mean(variant.wall),
        1000 * statistics.median(variant.cpu), median / floor))
  return lines


def breakdown_table(script_variant, accounting):
  """Markdown lines: the script loop's mean step split by who spends it."""
  steps = len(script_variant.wall)
  step_seconds = sum(script_variant.wall) / steps

  def per_step(kind, owner):
    return (accounting.seconds[(kind, owner)] / steps,
            accounting.calls[(kind, owner)] / steps)

  main_seconds, _ = per_step('run', MAIN_RUN)
  # (part, ms/step, of which in its own session.run calls, calls per step)
  rows = [("the step's session.run (train op + hooks' fetches)",
           main_seconds, 0.0, 0.0)]
  for name in accounting.hook_names:
    rows.append(('%s: before_run + after_run' % name,)
                + per_step('hook', name)[:1] + per_step('run', name))
  rows.append(('MonitoredSession machinery and should_stop (the rest)',
               step_seconds - sum(row[1] for row in rows), 0.0, 0.0))
  lines = ['| part of a script-loop step | ms/step (mean) | share | of which '
           'its own session.run calls, ms/step | its own session.run calls '
           'per step |', '|---|---:|---:|---:|---:|']
  for name, seconds, run_seconds, run_calls in rows:
    lines.append('| %s | %.3f | %.1f%% | %.3f | %.3f |' % (
        name, 1000 * seconds, 100 * seconds / step_seconds,
        1000 * run_seconds, run_calls))
  lines.append('| total | %.3f | 100.0%% | %.3f | %.3f |' % (
      1000 * step_seconds, 1000 * sum(row[2] for row in rows),
      sum(row[3] for row in rows)))
  return lines


def tables(args, variants, accounting):
  return (['### Step variants, interleaved in one process', '']
          + variants_table(variants)
          + ['', '%d rounds x %d timed steps per variant after %d warm-up '
             'steps; CPU is the whole process (all threads).' % (
                 args.rounds, args.steps_per_round, args.warmup_steps),
             '', '### The script loop\'s step, part by part', '']
          + breakdown_table(
              next(v for v in variants if v.name == SCRIPT_LOOP), accounting))


def main(argv=None):
  args, train_flags = parse_args(sys.argv[1:] if argv is None else argv)
  tf.logging.set_verbosity(tf.logging.WARN)
  variants, accounting = measure(args, train_flags)
  lines = tables(args, variants, accounting)
  print('\n'.join(lines))
  print(JSON_PREFIX + json.dumps(lines), flush=True)


if __name__ == '__main__':
  main()
