"""The flags of export_inference_graph.py as a FlagSnapshot, for tests
that build its configuration without running the script."""

from datasets import image_check
from training.run_config import FlagSnapshot


def export_flags(**values):
  """The flags of export_inference_graph.py at their defaults, changed by
  `values`."""
  defaults = dict(
      model_name='lenet', dataset_name='digits', dataset_dir=None,
      dataset_split_name='train', labels_offset=0, preprocessing_name=None,
      use_grayscale=False, is_training=False, image_size=None,
      batch_size=None, output_file='', write_text_graphdef=False,
      quantize=False, checkpoint_path=None, saved_model_dir=None,
      saved_model_version=1, tflite_file=None, tflite_quantization='none',
      representative_images=200, moving_average_decay=None,
      final_endpoint=None, is_video_model=False, num_frames=None,
      num_preprocessing_threads=4, num_clones=1,
      max_image_pixels=image_check.DEFAULT_MAX_IMAGE_PIXELS)
  defaults.update(values)
  return FlagSnapshot(defaults)
