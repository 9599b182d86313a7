"""Looks up an image-classification network by its Slim name.

Every network takes images [batch, default_image_size, default_image_size,
channels] (or of another side down to its `min_image_size`, below which its
VALID convolutions and poolings leave no pixel) and returns (logits
[batch, num_classes], end_points), with
end_points['Logits'] and end_points['Predictions']. With num_classes 0 or
None it returns the pre-logits features [batch, depth] instead, and creates
no classifier variables. Variable names are those of the published Slim
checkpoints.

The video networks i3d and s3dg take clips [batch, frames, height, width, 3]
instead (`default_num_frames` of them by default) and average their logits
over the frames left after their temporal strides.

Example:
  network_fn = nets_factory.get_network_fn('inception_v3', num_classes=1001)
  size = network_fn.default_image_size  # 299
  logits, end_points = network_fn(images)
"""

import functools
import inspect

from tf2_compat.slim_compat import slim
from nets import cifarnet
from nets import i3d
from nets import inception_resnet_v2
from nets import inception_v4
from nets import lenet
from nets import mobilenet_v1
from nets import mobilenet_v2
from nets import mobilenet_v3
from nets import nasnet
from nets import pnasnet
from nets import s3dg
from nets import slim_nets

networks_map = {
    'alexnet_v2': slim_nets.alexnet_v2,
    'cifarnet': cifarnet.cifarnet,
    'overfeat': slim_nets.overfeat,
    'vgg_a': slim_nets.vgg_a,
    'vgg_16': slim_nets.vgg_16,
    'vgg_19': slim_nets.vgg_19,
    'inception_v1': slim_nets.inception_v1,
    'inception_v2': slim_nets.inception_v2,
    'inception_v3': slim_nets.inception_v3,
    'i3d': i3d.i3d,
    's3dg': s3dg.s3dg,
    'lenet': lenet.lenet,
    'resnet_v1_50': slim_nets.resnet_v1_50,
    'resnet_v1_101': slim_nets.resnet_v1_101,
    'resnet_v1_152': slim_nets.resnet_v1_152,
    'resnet_v1_200': slim_nets.resnet_v1_200,
    'resnet_v2_50': slim_nets.resnet_v2_50,
    'resnet_v2_101': slim_nets.resnet_v2_101,
    'resnet_v2_152': slim_nets.resnet_v2_152,
    'resnet_v2_200': slim_nets.resnet_v2_200,
    'mobilenet_v1': mobilenet_v1.mobilenet_v1,
    'mobilenet_v1_075': mobilenet_v1.mobilenet_v1_075,
    'mobilenet_v1_050': mobilenet_v1.mobilenet_v1_050,
    'mobilenet_v1_025': mobilenet_v1.mobilenet_v1_025,
    'mobilenet_v2': mobilenet_v2.mobilenet_v2,
    'mobilenet_v2_140': mobilenet_v2.mobilenet_v2_140,
    'mobilenet_v2_035': mobilenet_v2.mobilenet_v2_035,
    'mobilenet_v3_small': mobilenet_v3.mobilenet_v3_small,
    'mobilenet_v3_large': mobilenet_v3.mobilenet_v3_large,
    'mobilenet_v3_small_minimalistic':
        mobilenet_v3.mobilenet_v3_small_minimalistic,
    'mobilenet_v3_large_minimalistic':
        mobilenet_v3.mobilenet_v3_large_minimalistic,
    'mobilenet_edgetpu': mobilenet_v3.mobilenet_edgetpu,
    'mobilenet_edgetpu_075': mobilenet_v3.mobilenet_edgetpu_075,
    'nasnet_cifar': nasnet.nasnet_cifar,
    'nasnet_mobile': nasnet.nasnet_mobile,
    'nasnet_large': nasnet.nasnet_large,
    'pnasnet_mobile': pnasnet.pnasnet_mobile,
    'pnasnet_large': pnasnet.pnasnet_large,
    'inception_v4': inception_v4.inception_v4,
    'inception_resnet_v2': inception_resnet_v2.inception_resnet_v2,
}

arg_scopes_map = {
    'alexnet_v2': slim_nets.alexnet_v2_arg_scope,
    'cifarnet': cifarnet.cifarnet_arg_scope,
    'overfeat': slim_nets.overfeat_arg_scope,
    'vgg_a': slim_nets.vgg_arg_scope,
    'vgg_16': slim_nets.vgg_arg_scope,
    'vgg_19': slim_nets.vgg_arg_scope,
    'inception_v1': slim_nets.inception_v1_arg_scope,
    'inception_v2': slim_nets.inception_v2_arg_scope,
    'inception_v3': slim_nets.inception_v3_arg_scope,
    'i3d': i3d.i3d_arg_scope,
    's3dg': s3dg.s3dg_arg_scope,
    'lenet': lenet.lenet_arg_scope,
    'resnet_v1_50': slim_nets.resnet_arg_scope,
    'resnet_v1_101': slim_nets.resnet_arg_scope,
    'resnet_v1_152': slim_nets.resnet_arg_scope,
    'resnet_v1_200': slim_nets.resnet_arg_scope,
    'resnet_v2_50': slim_nets.resnet_arg_scope,
    'resnet_v2_101': slim_nets.resnet_arg_scope,
    'resnet_v2_152': slim_nets.resnet_arg_scope,
    'resnet_v2_200': slim_nets.resnet_arg_scope,
    'mobilenet_v1': mobilenet_v1.mobilenet_v1_arg_scope,
    'mobilenet_v1_075': mobilenet_v1.mobilenet_v1_arg_scope,
    'mobilenet_v1_050': mobilenet_v1.mobilenet_v1_arg_scope,
    'mobilenet_v1_025': mobilenet_v1.mobilenet_v1_arg_scope,
    'mobilenet_v2': mobilenet_v2.mobilenet_v2_arg_scope,
    'mobilenet_v2_140': mobilenet_v2.mobilenet_v2_arg_scope,
    'mobilenet_v2_035': mobilenet_v2.mobilenet_v2_arg_scope,
    'mobilenet_v3_small': mobilenet_v3.mobilenet_v3_arg_scope,
    'mobilenet_v3_large': mobilenet_v3.mobilenet_v3_arg_scope,
    'mobilenet_v3_small_minimalistic': mobilenet_v3.mobilenet_v3_arg_scope,
    'mobilenet_v3_large_minimalistic': mobilenet_v3.mobilenet_v3_arg_scope,
    'mobilenet_edgetpu': mobilenet_v3.mobilenet_v3_arg_scope,
    'mobilenet_edgetpu_075': mobilenet_v3.mobilenet_v3_arg_scope,
    'nasnet_cifar': nasnet.nasnet_cifar_arg_scope,
    'nasnet_mobile': nasnet.nasnet_mobile_arg_scope,
    'nasnet_large': nasnet.nasnet_large_arg_scope,
    'pnasnet_mobile': pnasnet.pnasnet_mobile_arg_scope,
    'pnasnet_large': pnasnet.pnasnet_large_arg_scope,
    'inception_v4': inception_v4.inception_v4_arg_scope,
    'inception_resnet_v2': inception_resnet_v2.inception_resnet_v2_arg_scope,
}


def get_network_fn(name, num_classes, weight_decay=0.0, is_training=False,
                   batch_norm_decay=None):
  """Returns a function that builds network `name` in its arg scope.

  Args:
    name: a key of `networks_map`, e.g. 'inception_v3'.
    num_classes: number of classes; 0 or None builds no classifier and makes
      the function return pre-logits features [batch, depth].
    weight_decay: L2 coefficient passed to the network's arg scope.
    is_training: whether batch norm and dropout run in training mode.
    batch_norm_decay: None: the arg scope's own decay of the batch norm
      moving averages; else this one, for a network whose arg scope takes
      `batch_norm_decay`.

  Returns:
    network_fn(images, **kwargs) -> (logits, end_points), where kwargs are
    further arguments of the network. It has the network's
    `default_image_size` and `min_image_size` (and, for the video
    networks, `default_num_frames`).

  Raises:
    ValueError: if `name` is not a known network, or `batch_norm_decay` is
      given for one whose arg scope does not take it.
  """
  if name not in networks_map:
    raise ValueError('unknown network name %r; known networks: %s'
                     % (name, ', '.join(sorted(networks_map))))
  network = networks_map[name]
  scope_kwargs = {'weight_decay': weight_decay}
  if batch_norm_decay is not None:
    if 'batch_norm_decay' not in inspect.signature(
        arg_scopes_map[name]).parameters:
      raise ValueError('%s\'s arg scope takes no batch_norm_decay; leave it '
                       'unset for %s' % (name, name))
    scope_kwargs['batch_norm_decay'] = batch_norm_decay

  @functools.wraps(network)
  def network_fn(images, **kwargs):
    with slim.arg_scope(arg_scopes_map[name](**scope_kwargs)):
      return network(images, num_classes=num_classes,
                     is_training=is_training, **kwargs)

  return network_fn
