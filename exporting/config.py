"""The flags of export_inference_graph.py, validated: `ExportConfig`.

`export_config` checks every flag, the checkpoint, the dataset and the
output paths, and raises one UsageError listing all problems before
anything is built or written.
"""

import dataclasses
import os
import typing

from exporting import model as model_lib
from exporting import outputs
from training import checkpoint_fit
from training import flag_checks
from training import inputs as inputs_lib
from training import lookup
from training import resume_check
from training import run_config
from training.errors import Problems

# Images per batch read for the int8 calibration.
_CALIBRATION_BATCH = 50


@dataclasses.dataclass(frozen=True)
class Calibration:
  """Where the images calibrating an int8 TFLite file come from.

  Attributes:
    inputs: the training.inputs.InputConfig of the split.
    model: its lookup.ModelAndData.
    num_images: how many of its first images.
  """
  inputs: inputs_lib.InputConfig
  model: lookup.ModelAndData
  num_images: int


@dataclasses.dataclass(frozen=True)
class ExportConfig:
  """What one export builds and writes.

  Attributes:
    model: the exporting.model.ExportModel.
    batch_size: the static batch of the input; None: any.
    checkpoint_path: --checkpoint_path as given, for messages; None: the
      GraphDef is written without weights.
    checkpoint: the readable checkpoint prefix it names, or None.
    moving_average_decay: read the moving averages kept with this decay;
      None: the weights.
    dataset_name, labels_offset: for messages about a checkpoint.
    output_file: where the GraphDef goes, or ''.
    write_text_graphdef: write it as text.
    saved_model_dir: the SavedModel's base folder, or None.
    saved_model_version: its version folder's number.
    tflite_file: where the TFLite file goes, or None.
    tflite_quantization: one of exporting.tflite.QUANTIZATIONS.
    quantize: the network is quantization-aware (--quantize): its int8
      TFLite file takes the trained ranges.
    calibration: a Calibration for int8, else None.
  """
  model: model_lib.ExportModel
  batch_size: typing.Optional[int]
  checkpoint_path: typing.Optional[str]
  checkpoint: typing.Optional[str]
  moving_average_decay: typing.Optional[float]
  dataset_name: str
  labels_offset: int
  output_file: str
  write_text_graphdef: bool
  saved_model_dir: typing.Optional[str]
  saved_model_version: int
  tflite_file: typing.Optional[str]
  tflite_quantization: str
  quantize: bool
  calibration: typing.Optional[Calibration]

  @property
  def saved_model_path(self):
    """The SavedModel's version folder, or None."""
    if not self.saved_model_dir:
      return None
    return os.path.join(self.saved_model_dir, str(self.saved_model_version))

  @property
  def choices(self):
    """The checkpoint_fit.Choices a refused checkpoint is compared with."""
    return checkpoint_fit.Choices(self.model.model_name, self.dataset_name,
                                  self.labels_offset)


def _overlap(path, other):
  """Whether writing to `path` and to `other` touches the same file: the
  same path, or one inside the other (a SavedModel is a folder), links
  resolved."""
  path, other = os.path.realpath(path), os.path.realpath(other)
  return os.path.commonpath([path, other]) in (path, other)


def _check_outputs(f, problems):
  """At least one output, each a new path that can be written."""
  problems.check(
      f.output_file or f.saved_model_dir or f.tflite_file,
      'nothing to export: give --output_file, --saved_model_dir or '
      '--tflite_file')
  version_dir = (os.path.join(f.saved_model_dir, str(f.saved_model_version))
                 if f.saved_model_dir else None)
  paths = [(flag, path) for flag, path in (('output_file', f.output_file),
                                           ('saved_model_dir', version_dir),
                                           ('tflite_file', f.tflite_file))
           if path]
  for flag, path in paths:
    found = outputs.problem(flag, path)
    if found:
      problems.add(found)
  for index, (flag, path) in enumerate(paths):
    for other_flag, other_path in paths[index + 1:]:
      problems.check(
          not _overlap(path, other_path),
          '--%s=%s and --%s=%s would write over each other: give each '
          'output a path of its own, none inside another'
          % (flag, getattr(f, flag), other_flag, getattr(f, other_flag)))
  for flag in ('saved_model_dir', 'tflite_file'):
    problems.check(
        not getattr(f, flag) or f.checkpoint_path,
        '--%s needs --checkpoint_path: the weights it runs with' % flag)


def _check_clips_and_end_point(f, problems):
  """--num_frames goes with --is_video_model; the SavedModel (which
  decodes images and returns classes) takes neither clips nor an end
  point, and neither quantization-aware networks nor TFLite take
  clips."""
  if f.is_video_model:
    problems.check(f.num_frames is not None,
                   '--is_video_model needs --num_frames: the frames of each '
                   'clip the exported graph takes')
  else:
    problems.check(f.num_frames is None,
                   '--num_frames=%s is for video networks; add '
                   '--is_video_model, or drop --num_frames' % f.num_frames)
  for flag, given in (('--is_video_model', f.is_video_model),
                      ('--final_endpoint=%s' % f.final_endpoint,
                       f.final_endpoint)):
    problems.check(
        not (given and f.saved_model_dir),
        '--saved_model_dir with %s: the SavedModel decodes images and '
        'returns classes; export with --output_file instead' % flag)
  problems.check(
      not (f.is_video_model and f.quantize),
      '--quantize with --is_video_model: quantization-aware networks '
      'quantize 2-D layers, and the video networks\' 3-D convolutions are '
      'not; export the float network (drop --quantize)')
  problems.check(
      not (f.is_video_model and f.tflite_file),
      '--tflite_file with --is_video_model: TFLite\'s builtin ops have no '
      '3-D pooling (MaxPool3D, AvgPool3D); export the clips\' graph with '
      '--output_file')


def _calibration(f, model, problems):
  """The Calibration of an int8 TFLite export, else None."""
  if not f.tflite_file or not f.tflite_quantization.startswith('int8'):
    return None
  model_and_data = problems.attempt(lookup.model_and_data, f,
                                    is_training=False)
  if model_and_data is None or model is None:
    return None
  return Calibration(
      inputs=inputs_lib.InputConfig(
          dataset_name=f.dataset_name,
          dataset_split_name=f.dataset_split_name,
          dataset_dir=f.dataset_dir, labels_offset=f.labels_offset,
          preprocessing_name=f.preprocessing_name or f.model_name,
          batch_size=_CALIBRATION_BATCH, image_size=model.image_size,
          num_readers=1,
          num_preprocessing_threads=f.num_preprocessing_threads,
          max_image_pixels=f.max_image_pixels),
      model=model_and_data, num_images=f.representative_images)


def export_config(flag_values):
  """The ExportConfig of export_inference_graph.py's flags, all checked.

  Args:
    flag_values: FLAGS once parsed, or a FlagSnapshot of them.

  Raises:
    UsageError: one line for each problem.
  """
  f = run_config.FlagSnapshot.read(flag_values)
  problems = Problems()
  refused = flag_checks.check_numbers(f, flag_checks.EXPORT_RANGES,
                                     problems)
  _check_outputs(f, problems)
  _check_clips_and_end_point(f, problems)
  checkpoint = (problems.attempt(resume_check.readable_checkpoint,
                                 f.checkpoint_path)
                if f.checkpoint_path else None)
  # The model is built at --image_size: not at one out of range.
  model = (None if 'image_size' in refused else
           problems.attempt(model_lib.export_model, f,
                            is_training=f.is_training))
  if model is not None:
    flag_checks.check_image_size('image_size', f.image_size, model, problems)
  calibration = _calibration(f, model, problems)
  problems.raise_if_any()
  return ExportConfig(
      model=model, batch_size=f.batch_size,
      checkpoint_path=f.checkpoint_path, checkpoint=checkpoint,
      moving_average_decay=f.moving_average_decay,
      dataset_name=f.dataset_name, labels_offset=f.labels_offset,
      output_file=f.output_file, write_text_graphdef=f.write_text_graphdef,
      saved_model_dir=f.saved_model_dir,
      saved_model_version=f.saved_model_version, tflite_file=f.tflite_file,
      tflite_quantization=f.tflite_quantization, quantize=f.quantize,
      calibration=calibration)
