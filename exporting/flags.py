"""Flags of export_inference_graph.py, under upstream Slim's names.

The dataset and network flags (--model_name, --dataset_name, --dataset_dir,
--labels_offset, --use_grayscale, --preprocessing_name,
--moving_average_decay) are the training and evaluation scripts' own
(training/common_flags.py). Upstream's --checkpoint_path belonged to its
separate freeze step; --saved_model_dir, --tflite_file and what follows
them are new. --final_endpoint, --is_video_model and --num_frames are
upstream's: the GraphDef (frozen or not) takes them, TFLite an end point
but no clips, the SavedModel neither.
"""

from absl import flags

from exporting import tflite
from training import common_flags
from training import flag_checks

flags.DEFINE_bool('is_training', False,
                  'Export the training graph (batch norm on batch '
                  'statistics, dropout) instead of the inference graph.')
flag_checks.DEFINE_whole_number(
    'image_size', None, 'The side of the input images; None: the network default.',
    flag_checks.EXPORT_RANGES)
flag_checks.DEFINE_whole_number(
    'batch_size', None, 'The batch of the input placeholder; None: any.',
    flag_checks.EXPORT_RANGES)
flags.DEFINE_string('dataset_split_name', 'train',
                    'The split whose images calibrate an int8 TFLite file.')
flags.DEFINE_string('output_file', '',
                    'Where to write the GraphDef; frozen (weights as '
                    'constants) with --checkpoint_path.')
flags.DEFINE_string('final_endpoint', None,
                    'End the exported graph at this end point of the '
                    'network (a name of its end_points) instead of its '
                    'Predictions.')
flags.DEFINE_bool('is_video_model', False,
                  'The network takes clips (i3d, s3dg): the input is '
                  '[batch, --num_frames, height, width, channels].')
flags.DEFINE_integer('num_frames', None,
                     'The frames of each input clip; required with '
                     '--is_video_model.')
flags.DEFINE_bool('write_text_graphdef', False,
                  'Write the GraphDef in protobuf text format.')
flags.DEFINE_bool('quantize', False,
                  'Export the network quantization-aware (FakeQuant ops, '
                  'batch norm folded), for a checkpoint trained with '
                  '--quantize_delay; its int8 TFLite file takes the '
                  'trained ranges.')
flags.DEFINE_string('checkpoint_path', None,
                    'Checkpoint prefix, or a directory (its newest readable '
                    'checkpoint), whose weights are exported.')
flags.DEFINE_string('saved_model_dir', None,
                    'Write a SavedModel into version folder '
                    '--saved_model_version of this folder (TensorFlow '
                    'Serving\'s layout).')
flags.DEFINE_integer('saved_model_version', 1,
                     'The version folder of the SavedModel.')
flags.DEFINE_string('tflite_file', None, 'Where to write a TFLite model.')
flags.DEFINE_enum('tflite_quantization', 'none', tflite.QUANTIZATIONS,
                  'none: float32; float16: float16 weights; int8: full '
                  'integer, calibrated on --dataset_split_name, a scale '
                  'per output channel of the weights; int8_per_tensor: '
                  'one scale per weight tensor (a smaller file for '
                  'networks of small layers).')
flags.DEFINE_integer('representative_images', 200,
                     'How many images of --dataset_split_name calibrate an '
                     'int8 TFLite file.')

FLAGS = common_flags.FLAGS
