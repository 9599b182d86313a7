"""Adam's first update, checked against its rule: what one training step of
a network must do on any CPU, where a lower loss after one small step
depends on the CPU's kernels (tests/test_nets_*.py use it)."""

import numpy as np

from tf2_compat.slim_compat import tf


def first_moments(variables):
  """Adam's first-moment slots ('<variable>/Adam') of `variables`, in
  their order, from the default graph."""
  slots = {v.op.name: v for v in tf.global_variables()}
  return [slots[v.op.name + '/Adam'] for v in variables]


def check_one_update(names, before, after, first_moments, learning_rate):
  """Asserts that variables moved from `before` to `after` (arrays, by
  `names`) as one update of tf.train.AdamOptimizer moves them.

  Whether one small step lowers the loss depends on the CPU's kernels (the
  order of their float sums, float16 above all): oneDNN on an AVX-512
  Xeon raised Inception v4's loss where this machine's lowered it. The
  update rule does not. Adam's first update (t = 1, m = (1 - beta1) g,
  v = (1 - beta2) g^2, bias-corrected) is
  -learning_rate * g / (|g| + epsilon / sqrt(1 - beta2)): against the
  gradient, by about learning_rate where |g| is well above 3.2e-7 and
  never by more. Adam's m after it gives g; the gradients themselves, of
  the kernels' float sums, may differ from CPU to CPU (a batch norm's beta
  before another batch norm has only rounding noise).

  Every layer's weights (the variables named '.../weights') must have
  some element with a gradient above 3.2e-5, moved by 99% of
  learning_rate or more: the loss reaches each layer, through every clone
  and deploy() option.

  Args:
    names: the variables' names, for the messages.
    before, after: their values around the update.
    first_moments: their Adam slot m after it.
    learning_rate: Adam's.
  """
  beta1, beta2, epsilon = 0.9, 0.999, 1e-8  # AdamOptimizer's defaults.
  for name, old, new, m in zip(names, before, after, first_moments):
    assert np.all(np.isfinite(new)) and np.all(np.isfinite(m)), name
    step = new.astype(np.float64) - old
    # Float32 rounding of the new value: an ulp of the larger.
    rounding = 2 * np.spacing(np.maximum(np.abs(old), np.abs(new)))
    assert np.all(np.abs(step) <= learning_rate * (1 + 1e-4) + rounding), (
        name, np.max(np.abs(step)))
    gradient = m.astype(np.float64) / (1 - beta1)
    expected = -learning_rate * gradient / (
        np.abs(gradient) + epsilon / np.sqrt(1 - beta2))
    # Adam's float32 arithmetic: a few ulps of its terms.
    np.testing.assert_allclose(step, expected, rtol=1e-3,
                               atol=rounding.max(), err_msg=name)
    if name.endswith('/weights'):
      assert np.any(np.abs(gradient) >= 3.2e-5), (name, np.abs(m).max())


def without_graph_rewrites(session_config):
  """`session_config` (a tf.ConfigProto, changed in place and returned)
  with Grappler's graph rewrites off.

  For the tests that run a large network's train op once or twice:
  Grappler rewrites the graph once per session before its first run,
  30 of the 37 s that Inception v4's first step took here (85,000 ops,
  synced batch norm). The rewrites are TensorFlow's, not the project's;
  the project's ops go through them in every other training test.
  """
  session_config.graph_options.rewrite_options.disable_meta_optimizer = True
  return session_config
