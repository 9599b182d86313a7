"""`tf.contrib.tfprof.model_analyzer` for TF 1.x programs, on TF 2.x.

TF 1.x programs print their parameter and FLOP counts with

  tf.contrib.tfprof.model_analyzer.print_model_analysis(
      tf.get_default_graph(),
      tfprof_options=tf.contrib.tfprof.model_analyzer.
      TRAINABLE_VARS_PARAMS_STAT_OPTIONS)

TF 2.x has the same profiler as `tf.compat.v1.profiler.profile`, with its
options built by `ProfileOptionBuilder`; the option dicts keep TF 1.x's
keys. Here are the two option sets programs use and the function, on it.
"""

from tf2_compat.slim_compat import tf

_OPTIONS = tf.profiler.ProfileOptionBuilder
TRAINABLE_VARS_PARAMS_STAT_OPTIONS = _OPTIONS.trainable_variables_parameter()
FLOAT_OPS_OPTIONS = _OPTIONS.float_operation()


def print_model_analysis(graph, run_meta=None, op_log=None,
                         tfprof_cmd='scope',
                         tfprof_options=TRAINABLE_VARS_PARAMS_STAT_OPTIONS):
  """Prints the profile of `graph` (by default to stdout) and returns it,
  a tfprof GraphNodeProto (MultiGraphNodeProto for 'code' and 'op')."""
  return tf.profiler.profile(graph, run_meta=run_meta, op_log=op_log,
                             cmd=tfprof_cmd, options=tfprof_options)
