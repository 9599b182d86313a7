"""The smallest image each network builds at, and image sizes refused below
it with one line naming the value, the minimum and the fix; sizes (and
batches) beyond TensorFlow's int32 counts refused naming the range."""

import dataclasses
import functools
import os

from absl import flags
from absl.testing import flagsaver
import pytest

from nets import nasnet
from nets import nasnet_common
from nets import nets_factory
from nets import pnasnet
from tests.script_runner import error_lines
from tests.script_runner import run_script
from tf2_compat.slim_compat import tf
from training import flag_checks
from training import lookup
from training import run_config
from training.errors import Problems
from training.errors import UsageError
from training.flags import FLAGS


# Tensor equality off (tests/conftest.py): NASNet's builds take half the time.
pytestmark = pytest.mark.usefixtures('identity_equality_for_tensors')

_TRAIN_IMAGE_SIZE_RULES = [condition for name, condition, _ in
                           flag_checks.TRAIN_RANGES
                           if name == 'train_image_size']


def _build(network_fn, size):
  # The video networks take clips of their default number of frames.
  frames = getattr(network_fn, 'default_num_frames', None)
  shape = [1, size, size, 3] if frames is None else [1, frames, size, size, 3]
  with tf.Graph().as_default():
    network_fn(tf.zeros(shape))


def _refusals(name, size):
  """The lines check_image_size adds for --train_image_size=size."""
  network_fn = nets_factory.get_network_fn(name, num_classes=10)
  model = lookup.ModelAndData(None, 10, network_fn, None, None, name)
  problems = Problems()
  flag_checks.check_image_size('train_image_size', size, model, problems)
  try:
    problems.raise_if_any()
  except UsageError as e:
    return list(e.lines)
  return []


# The deeper ResNets repeat the 50-layer nets' blocks at the same strides:
# built once per version (20-50 s of graph building each, otherwise), and
# held to the same minimum below.
_DEEPER_RESNETS = {'resnet_v%d_%d' % (version, depth): 'resnet_v%d_50' % version
                   for version in (1, 2) for depth in (101, 152, 200)}
# So do the large NASNet and PNASNet at the strides of the mobile ones, with
# the auxiliary head at the same place (their cells are only wider and more
# per stack): 60-90 s of building each, held to the mobile ones' minimum.
_LARGE_NASNETS = {'nasnet_large': 'nasnet_mobile',
                  'pnasnet_large': 'pnasnet_mobile'}
# NASNet-A and PNASNet-5 take 20-90 s to build (2-3 minutes at the
# minimum and one less on a busy machine). Their minimum is set by the
# stem, the stride-2 steps and the auxiliary head, not by the number of
# cells between them: they are built with one cell per stack, the same
# stride-2 steps and the auxiliary head on the same stack (still about 40
# s on a busy machine).
_SHORT_NASNETS = {'nasnet_cifar': (nasnet.nasnet, nasnet.CIFAR_CONFIG),
                  'nasnet_mobile': (nasnet.nasnet, nasnet.MOBILE_CONFIG),
                  'pnasnet_mobile': (pnasnet.pnasnet, pnasnet.MOBILE_CONFIG)}


def _network_fn(name):
  """The network as training builds it, with its classifier (Inception
  v3's auxiliary head too); NASNets with one cell per stack."""
  network_fn = nets_factory.get_network_fn(name, num_classes=10,
                                           is_training=True)
  if name not in _SHORT_NASNETS:
    return network_fn
  build, config = _SHORT_NASNETS[name]
  short = dataclasses.replace(config, num_cells=3)
  assert len(short.reduction_indices()) == len(config.reduction_indices())
  assert (short.aux_head_index() is None) == (config.aux_head_index() is None)
  short_fn = nasnet_common.published_network(
      build, short, name, network_fn.default_image_size,
      network_fn.min_image_size)
  return functools.partial(short_fn, num_classes=10, is_training=True)
# Slow: those, and Inception v4 and Inception-ResNet v2 (45-65 s at their
# smallest side and at one less).
_SLOW = tuple(_SHORT_NASNETS) + ('inception_v4', 'inception_resnet_v2')


def test_deeper_resnets_have_the_minimum_of_their_50_layer_net():
  for deeper, fifty in sorted(_DEEPER_RESNETS.items()):
    assert (nets_factory.get_network_fn(deeper, 10).min_image_size ==
            nets_factory.get_network_fn(fifty, 10).min_image_size), deeper


def test_large_nasnets_have_the_minimum_of_their_mobile_net():
  for large, mobile in sorted(_LARGE_NASNETS.items()):
    assert (nets_factory.get_network_fn(large, 10).min_image_size ==
            nets_factory.get_network_fn(mobile, 10).min_image_size), large


@pytest.mark.parametrize('name', [
    pytest.param(name, marks=pytest.mark.slow) if name in _SLOW
    else name for name in sorted(set(nets_factory.networks_map) -
                                 set(_DEEPER_RESNETS) - set(_LARGE_NASNETS))])
def test_a_network_builds_at_its_min_image_size_and_not_one_less(name):
  network_fn = _network_fn(name)
  minimum = nets_factory.get_network_fn(name, 10).min_image_size
  assert 1 <= minimum <= nets_factory.get_network_fn(
      name, 10).default_image_size
  _build(network_fn, minimum)
  assert _refusals(name, minimum) == []
  if minimum > 1:
    with pytest.raises(ValueError, match='Negative dimension size'):
      _build(network_fn, minimum - 1)
    assert len(_refusals(name, minimum - 1)) == 1
  else:  # 0 pixels: the range rule's.
    assert not all(rule(0) for rule in _TRAIN_IMAGE_SIZE_RULES)


def training_refusal(digits_dir, tmp_path, *flags):
  """The lines of the UsageError that the training script's configuration
  raises for `flags` on the digits dataset."""
  with flagsaver.flagsaver():
    FLAGS.unparse_flags()
    FLAGS(['train_image_classifier.py', '--dataset_name=digits',
           '--dataset_dir=%s' % digits_dir,
           '--train_dir=%s' % (tmp_path / 'train')] + list(flags))
    snapshot = run_config.FlagSnapshot.of(FLAGS)
  with pytest.raises(UsageError) as refused:
    run_config.from_flags(snapshot, environ={})
  return refused.value.lines


@pytest.mark.parametrize('name, size, minimum, default', [
    ('lenet', 3, 4, 28),
    ('inception_v3', 106, 107, 299),
    ('vgg_16', 200, 224, 224),
])
def test_a_train_image_size_below_the_minimum_is_refused_naming_both(
    digits_dir, tmp_path, name, size, minimum, default):
  assert training_refusal(digits_dir, tmp_path, '--model_name=%s' % name,
                          '--train_image_size=%d' % size) == (
      '--train_image_size=%d is too small for %s: its layers need images of '
      'at least %dx%d pixels; use --train_image_size=%d or more, or leave it '
      "unset for %s's default, %d" % (size, name, minimum, minimum, minimum,
                                      name, default),)


def test_an_eval_image_size_below_the_minimum_exits_2(digits_dir, tmp_path):
  # eval's flags cannot be defined in this process, which has the training
  # script's: it runs as a script.
  result = run_script(
      'eval_image_classifier.py', '--dataset_name=digits',
      '--dataset_dir=%s' % digits_dir, '--model_name=cifarnet',
      '--eval_image_size=2', '--checkpoint_path=%s' % tmp_path,
      '--eval_dir=%s' % (tmp_path / 'eval'), timeout=120)
  assert result.returncode == 2, result.stdout[-3000:]
  # The checkpoint is missing too: every problem has its line.
  assert ('error: --eval_image_size=2 is too small for cifarnet: its layers '
          'need images of at least 4x4 pixels; use --eval_image_size=4 or '
          "more, or leave it unset for cifarnet's default, 32"
          in error_lines(result.stdout))
  assert 'Traceback' not in result.stdout


# The ranges of the size flags, as every script's refusal names them.
IMAGE_SIZE_RANGE = (
    "from 1 to 26754 (pixels; a larger 3-channel image holds 2**31 values or "
    "more, beyond TensorFlow's int32 counts)")
BATCH_SIZE_RANGE = ("from 1 to 2147483647 (examples per clone; "
                     "TensorFlow's int32 shapes hold no larger batch)")


@pytest.mark.parametrize('flag, line', [
    ('--train_image_size=3000000000', '--train_image_size must be %s, got '
     '3000000000' % IMAGE_SIZE_RANGE),
    ('--batch_size=3000000000', '--batch_size must be %s, got 3000000000'
     % BATCH_SIZE_RANGE),
])
def test_a_train_size_beyond_int32_counts_is_refused_naming_the_range(
    digits_dir, tmp_path, flag, line):
  assert training_refusal(digits_dir, tmp_path, '--model_name=lenet',
                          flag) == (line,)
  assert not (tmp_path / 'train').exists()


@pytest.mark.parametrize('flag, allowed', [
    ('train_image_size', IMAGE_SIZE_RANGE), ('batch_size', BATCH_SIZE_RANGE)])
def test_a_train_size_that_is_no_whole_number_is_refused_naming_the_range(
    flag, allowed):
  with flagsaver.flagsaver():
    FLAGS.unparse_flags()
    with pytest.raises(flags.IllegalFlagValueError) as refused:
      FLAGS(['train_image_classifier.py', '--%s=3e19' % flag])
  assert str(refused.value) == (
      'flag --%s=3e19: not a whole number; give one %s' % (flag, allowed))


@pytest.mark.parametrize('flag, lines', [
    ('--eval_image_size=3000000000', [
        'error: --eval_image_size must be %s, got 3000000000'
        % IMAGE_SIZE_RANGE,
        'error: --checkpoint_path=CKPT does not exist; give an existing '
        'checkpoint prefix (e.g. .../model.ckpt-1000) or directory']),
    ('--eval_image_size=3e19', [
        'error: flag --eval_image_size=3e19: not a whole number; give one %s '
        '(--helpfull lists the flags)' % IMAGE_SIZE_RANGE]),
])
def test_an_eval_image_size_beyond_int32_counts_exits_2_naming_the_range(
    digits_dir, tmp_path, flag, lines):
  checkpoint = str(tmp_path / 'none')
  result = run_script(
      'eval_image_classifier.py', '--dataset_name=digits',
      '--dataset_dir=%s' % digits_dir, '--model_name=lenet', flag,
      '--checkpoint_path=%s' % checkpoint,
      '--eval_dir=%s' % (tmp_path / 'eval'), timeout=120)
  assert result.returncode == 2, result.stdout[-3000:]
  assert 'Traceback' not in result.stdout
  assert error_lines(result.stdout) == [line.replace('CKPT', checkpoint)
                                        for line in lines]
  assert os.listdir(str(tmp_path)) == []
